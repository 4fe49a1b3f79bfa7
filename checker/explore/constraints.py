"""Which states and steps a model's constraints leave out (TLC's isInModel and isInActions).

The kernels give each state a mask (``violations``: invariants, then state constraints) and each
step one (``props``: transition properties, then action constraints); a state or step outside
the model has a constraint's bit set. Explorers, the graph builder and the symmetry check ask here.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from kraftcheck.checker.model import Model


def outside_constraints(model: Model, masks: Optional[np.ndarray] = None,
                        props: Optional[np.ndarray] = None) -> np.ndarray:
    """Per state (``masks``, uint64), per step (``props``, uint64) or per step to a state (both):
    whether a state constraint refuses the state or an action constraint the step."""
    if masks is not None:
        bad = (masks & np.uint64(model.constraint_bits)) != 0
    else:
        bad = np.zeros(0 if props is None else props.shape[0], bool)
    if props is not None and model.action_constraints:
        bad |= (props & np.uint64(model.action_constraint_bits)) != 0
    return bad
