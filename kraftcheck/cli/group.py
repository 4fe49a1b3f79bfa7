"""The ``kraftcheck`` click group: its commands, each imported only when it runs (so ``kraftcheck
check`` does not pay for networkx and the trace code). The command table is ``main.SUBCOMMANDS``."""

from __future__ import annotations

import importlib

import click

from kraftcheck.checker import __version__
from kraftcheck.cli.main import SUBCOMMANDS


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
    130 interrupted (Ctrl-C, SIGTERM or SIGHUP).
    """
