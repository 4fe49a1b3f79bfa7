"""Shared fixtures: the explorers every conformance test runs against."""

from __future__ import annotations

import pytest

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer

# Every backend must pass the conformance suite; a new engine adds itself here.
EXPLORERS = {
    "engine": lambda: Engine(),
    "engine-small-chunks": lambda: Engine(chunk_candidates=64, shard_bits=1),
    "engine-interpreted": lambda: Engine(compile="never"),  # the first tier, used while kernels compile
    "reference": lambda: ReferenceExplorer(),
}


@pytest.fixture(params=sorted(EXPLORERS))
def explorer(request):
    return EXPLORERS[request.param]()
