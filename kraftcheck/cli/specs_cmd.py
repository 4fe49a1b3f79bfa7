"""``kraftcheck specs``: the registered specs, their parameters, defaults and descriptions."""

from __future__ import annotations

import dataclasses
import sys

import click
from rich.padding import Padding
from rich.text import Text

from kraftcheck.cli.params import field_kind
from kraftcheck.cli.terminal import Terminal
from kraftcheck.checker.errors import KraftcheckError
from kraftcheck.specs import DEFAULT_SPEC, spec_class, spec_names


def describe_param(f: dataclasses.Field) -> str:
    meta = f.metadata
    parts = [field_kind(f)]
    if meta.get("choices"):
        parts.append("one of " + "|".join(map(str, meta["choices"])))
    elif meta.get("min") is not None or meta.get("max") is not None:
        parts.append(f"{meta.get('min', '')}..{meta.get('max', '')}")
    default = f.default if f.default is not dataclasses.MISSING else None
    return f"{', '.join(parts)}; default {default}"


@click.command()
@click.option("--no-color", is_flag=True, help="Plain text output.")
def specs(no_color: bool) -> None:
    """List the specs, their parameters, defaults and one-line descriptions."""
    terminal = Terminal(color=False if no_color else None)
    broken = 0
    for name in spec_names():
        try:  # one broken plugin must not hide the specs listed after it
            cls = spec_class(name)
        except KraftcheckError as e:
            terminal.error(str(e))
            broken += 1
            continue
        default = "  [dim](default spec)[/]" if name == DEFAULT_SPEC else ""
        terminal.out.print(f"[bold]{name}[/]{default}: {cls.summary}")
        # one block per parameter, so long names, choices and help read at 80 columns
        for f in dataclasses.fields(cls.Params):
            line = Text("  ")
            line.append(f.name, style="cyan")
            line.append(f"  {describe_param(f)}")
            terminal.out.print(line)
            terminal.out.print(Padding(Text(f.metadata.get("help", "")), (0, 0, 0, 6), expand=False))
        terminal.out.print()
    if broken:
        sys.exit(2)
