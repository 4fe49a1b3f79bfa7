"""How likely a simulation's counterexample is, step by step: for the first violation a
``--simulate`` run finds, the actions and action instances each state of the trace offers, and
the probability that a behaviour takes the trace's step there under by-action (1 / the actions
with a candidate, times 1 / that action's candidates) and under uniform (1 / the candidates).

The product over the trace is the chance of that exact sequence of steps from its initial state;
the rate at which a strategy finds the violation is that summed over every sequence that leads
there (other orders, other brokers), so the table says which steps a strategy makes rare, not the
rate itself. Candidates are counted as ``choose_successors`` counts them: successors that differ
from the state (the model's action constraints are not applied here).

    .venv/bin/python bench/simulation_corridor.py --param brokers=4 --param min_isr=3 \\
        --param election=any --check acked_writes_survive --seed 1 --max-behaviours 7426
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from kraftcheck.checker.codegen import NO_LABEL
from kraftcheck.checker.explore.compiled import kernel_shapes
from kraftcheck.checker.explore.simulate import DEFAULT_STRATEGY, STRATEGIES, SimulationOptions, simulate
from kraftcheck.checker.explore.tiers import compile_now
from kraftcheck.checker.model import Model
from kraftcheck.specs import spec_class


def parsed(text: str):
    """A parameter's value as the command line gives it: a number if it reads as one."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="kafka")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter of the spec (its Params field name), e.g. brokers=4")
    ap.add_argument("--check", required=True, help="the invariant whose first violation is analysed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-behaviours", type=int, required=True)
    ap.add_argument("--strategy", default=DEFAULT_STRATEGY, choices=STRATEGIES)
    a = ap.parse_args()
    params = {}
    for p in a.param:
        name, sep, text = p.partition("=")
        if not sep:
            raise SystemExit(f"--param {p!r}: write NAME=VALUE, e.g. brokers=4")
        params[name] = parsed(text)
    cls = spec_class(a.spec)
    model = Model(cls(cls.Params(**params)), check=[a.check])
    result = simulate(model, SimulationOptions(seed=a.seed, max_behaviours=a.max_behaviours, strategy=a.strategy,
                                               threads=1))
    if not result.violations:
        raise SystemExit(f"no violation of {a.check} within {a.max_behaviours} behaviours of seed {a.seed}")
    steps = result.violations[0].steps
    kernels = compile_now(model, kernel_shapes(model), lambda _: None, 0.0)
    nl = len(model.labels)
    buffers = kernels.buffers(1)
    by_action = uniform = 1.0
    print(f"{a.check}: behaviour number {result.simulation['found_in_behaviour'][a.check]:,} (from 0) of seed "
          f"{a.seed}, {len(steps)} states")
    print("| step | taken | actions | its instances | all candidates | p by-action | p uniform | offered (instances) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in range(len(steps) - 1):
        words = kernels.pack([steps[k].state])
        out = kernels.successors(words, 0, 1, buffers)
        offered: dict[str, int] = defaultdict(int)
        for row in range(nl):
            label = int(out.labels[row])
            if label != NO_LABEL and not (out.words[row] == words[0]).all():
                offered[model.labels[label].name] += 1
        taken = model.labels[steps[k + 1].label]
        p_action = 1 / len(offered) / offered[taken.name]
        p_uniform = 1 / sum(offered.values())
        by_action *= p_action
        uniform *= p_uniform
        print(f"| {k + 1} | `{taken}` | {len(offered)} | {offered[taken.name]} | {sum(offered.values())} | "
              f"{p_action:.3f} | {p_uniform:.3f} | {', '.join(f'{n} {c}' for n, c in offered.items())} |")
    print(f"\nthe sequence's probability: by-action {by_action:.3g}, uniform {uniform:.3g}")


if __name__ == "__main__":
    main()
