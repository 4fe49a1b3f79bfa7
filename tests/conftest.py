"""Shared fixtures: the explorers every conformance test runs against."""

from __future__ import annotations

import pytest

from kraftcheck.checker.explore.engine import Engine
from kraftcheck.checker.explore.reference import ReferenceExplorer
from kraftcheck.checker.explore.result import Options


class FingerprintEngine(Engine):
    """The engine with TLC's fingerprint set (``--fingerprints``): on these small specs no two
    states share a fingerprint, so every count must be the exact engine's."""

    def explore(self, model, options=Options(), progress=lambda p: None):
        import dataclasses
        result = super().explore(model, dataclasses.replace(options, fingerprints=True), progress)
        assert result.fingerprints and result.collision_probability is not None
        return result

# Every backend must pass the conformance suite; a new engine adds itself here.
EXPLORERS = {
    "engine": lambda: Engine(),
    "engine-small-chunks": lambda: Engine(chunk_candidates=64, shard_bits=1),
    "engine-interpreted": lambda: Engine(compile="never"),  # the first tier, used while kernels compile
    "engine-fingerprints": lambda: FingerprintEngine(),
    "reference": lambda: ReferenceExplorer(),
}


@pytest.fixture(params=sorted(EXPLORERS))
def explorer(request):
    return EXPLORERS[request.param]()
