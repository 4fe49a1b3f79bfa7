"""Entry point of the ``kraftcheck`` console script: the click group and its commands."""

from __future__ import annotations

import gc
import importlib
import sys

import click

from kraftcheck.checker import __version__

# Each command lives in its own module, imported only when that command runs (so `kraftcheck
# check` does not pay for networkx and the trace code): name -> "module:attribute".
SUBCOMMANDS = {
    "specs": "kraftcheck.cli.specs_cmd:specs",
    "check": "kraftcheck.cli.check_cmd:check",
    "trace": "kraftcheck.cli.trace_cmd:trace",
    "ci": "kraftcheck.cli.ci_cmd:ci",
    "sweep": "kraftcheck.cli.sweep_cmd:sweep",
    "cache": "kraftcheck.cli.cache_cmd:cache",
}


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80})
@click.version_option(__version__, prog_name="kraftcheck")
def cli() -> None:
    """kraftcheck: exhaustive model checking of Kafka's replication protocol under KRaft.

    Exit codes: 0 every invariant holds over the complete state space; 1 an invariant is
    violated; 2 usage or input error; 3 exploration incomplete (a limit was hit);
    130 interrupted.
    """


def main() -> None:
    try:
        cli(prog_name="kraftcheck")
    finally:
        # what is left is freed at exit without the cyclic collector: its pass over numba's and
        # the run's objects as the interpreter shuts down took 0.1-0.3 s of every short check
        gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
