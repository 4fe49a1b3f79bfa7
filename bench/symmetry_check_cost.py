"""What the check of a declared symmetry before exploring costs on the Kafka model: ``check_symmetry``
timed three times on the compiled kernels, one thread, with the whole group tried on each state
when it has at most UP_TO permutations (0: the generators only, a swap and a rotation).

    .venv/bin/python bench/symmetry_check_cost.py BROKERS UP_TO
"""

import sys
import time

from kraftcheck.checker import symmetry_check
from kraftcheck.checker.explore.compiled import kernel_shapes
from kraftcheck.checker.explore.tiers import compile_now
from kraftcheck.checker.kernels.threads import using_threads
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class


def main() -> None:
    brokers, symmetry_check.EVERY_PERMUTATION_BEFORE = int(sys.argv[1]), int(sys.argv[2])
    cls = spec_class("kafka")
    model = Model(cls(cls.Params(brokers=brokers, min_isr=brokers - 1, election="any")))
    with using_threads(1):
        kernels = compile_now(model, kernel_shapes(model), lambda _: None, 0.0)
        for _ in range(3):
            symmetry_check._checked.clear()
            t0 = time.perf_counter()
            symmetry_check.check_symmetry(model, kernels)
            print(f"{brokers} brokers, every permutation up to {sys.argv[2]}: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
