"""Entry point of the ``kraftcheck`` console script: the click group and its commands."""

from __future__ import annotations

import importlib
import sys

import click

from kraftcheck.checker import __version__

# Each command lives in its own module; "module:attribute" of the click command or group.
SUBCOMMANDS = [
    "kraftcheck.cli.specs_cmd:specs",
    "kraftcheck.cli.check_cmd:check",
    "kraftcheck.cli.trace_cmd:trace",
    "kraftcheck.cli.ci_cmd:ci",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kraftcheck")
def cli() -> None:
    """kraftcheck: exhaustive model checking of Kafka's replication protocol under KRaft.

    Exit codes: 0 every invariant holds over the complete state space; 1 an invariant is
    violated; 2 usage or input error; 3 exploration incomplete (a limit was hit);
    130 interrupted.
    """


for _target in SUBCOMMANDS:
    _module, _attr = _target.split(":")
    cli.add_command(getattr(importlib.import_module(_module), _attr))


def main() -> None:
    cli(prog_name="kraftcheck")


if __name__ == "__main__":
    sys.exit(main())
