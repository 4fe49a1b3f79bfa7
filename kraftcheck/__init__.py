"""kraftcheck: exhaustive, TLA+-style model checking of Kafka's replication protocol under KRaft.

The package's layers, bottom up: ``kraftcheck.checker`` (the engine: spec interface, state
encoding, compiled kernels, explorers), ``kraftcheck.specs`` and ``kraftcheck.invariants`` (the
models and their properties), ``kraftcheck.traces`` (counterexamples as networkx graphs), and at
the top ``kraftcheck.cli`` and this module's API, which see everything.

The public Python API (docs/writing-a-spec.md)::

    import kraftcheck

    result = kraftcheck.check("two_phase", rm=5)          # a registered spec, by name
    result = kraftcheck.check("my_specs.py:MyProtocol")   # or a file / module reference, a class
    result.status, result.distinct_states, result.violations

    graph = kraftcheck.load_trace(result.violations[0].trace_file)
    kraftcheck.replay_trace(graph).ok

    class MyProtocol(kraftcheck.Spec): ...                # fields, actions, invariants

Names are imported on first use, ``__version__`` too: ``import kraftcheck`` imports nothing else,
so that the command line (``kraftcheck.cli.main``) installs its signal handlers a few lines after
the interpreter's start.
"""

# public name -> "module:attribute"
_API = {
    "__version__": "kraftcheck.checker:__version__",
    # run a check
    "check": "kraftcheck.api:check",
    "simulate": "kraftcheck.api:simulate",
    "Result": "kraftcheck.checker.explore.result:Result",
    "Violation": "kraftcheck.checker.explore.result:Violation",
    "spec_class": "kraftcheck.specs:spec_class",
    "spec_names": "kraftcheck.specs:spec_names",
    # define a spec
    "Spec": "kraftcheck.checker.spec:Spec",
    "Field": "kraftcheck.checker.spec:Field",
    "Int": "kraftcheck.checker.spec:Int",
    "Bool": "kraftcheck.checker.spec:Bool",
    "Enum": "kraftcheck.checker.spec:Enum",
    "Set": "kraftcheck.checker.spec:Set",
    "Const": "kraftcheck.checker.spec:Const",
    "Action": "kraftcheck.checker.spec:Action",
    "Param": "kraftcheck.checker.spec:Param",
    "Invariant": "kraftcheck.checker.spec:Invariant",
    "TransitionProperty": "kraftcheck.checker.spec:TransitionProperty",
    "Constraint": "kraftcheck.checker.spec:Constraint",
    "ActionConstraint": "kraftcheck.checker.spec:ActionConstraint",
    "Symmetry": "kraftcheck.checker.spec:Symmetry",
    "Permuted": "kraftcheck.checker.spec:Permuted",
    "LaneTouch": "kraftcheck.checker.spec:LaneTouch",
    "Predicate": "kraftcheck.checker.spec:Predicate",
    "Liveness": "kraftcheck.checker.spec:Liveness",
    "Fairness": "kraftcheck.checker.spec:Fairness",
    "WF": "kraftcheck.checker.spec:WF",
    "SF": "kraftcheck.checker.spec:SF",
    "param": "kraftcheck.checker.spec:param",
    "Model": "kraftcheck.checker.model:Model",
    # errors
    "KraftcheckError": "kraftcheck.checker.errors:KraftcheckError",
    "UsageError": "kraftcheck.checker.errors:UsageError",
    "SpecError": "kraftcheck.checker.errors:SpecError",
    # traces
    "load_trace": "kraftcheck.traces.files:load",
    "save_trace": "kraftcheck.traces.files:save",
    "replay_trace": "kraftcheck.traces.replay:replay",
}

__all__ = list(_API)


def __getattr__(name: str) -> object:
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'kraftcheck' has no attribute {name!r}")
    import importlib
    module, attribute = target.split(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
