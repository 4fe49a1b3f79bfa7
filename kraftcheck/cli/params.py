"""Spec parameters on the command line: ``--param KEY=VALUE`` and options derived from a Params dataclass."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import click

from kraftcheck.checker.errors import UsageError
from kraftcheck.checker.spec import annotation_kind


def field_kind(f: dataclasses.Field) -> str:
    """'int', 'bool' or 'str', from the annotation (which may be a string under future annotations)."""
    return annotation_kind(f).__name__


def optional(f: dataclasses.Field) -> bool:
    t = f.type if isinstance(f.type, str) else str(f.type)
    return "None" in t or "Optional" in t


def parse_value(f: dataclasses.Field, text: str) -> Any:
    kind = field_kind(f)
    if kind == "str" and text in (f.metadata.get("choices") or ()):
        return text  # a choice named "none" (kafka's --recovery none) is that choice, not "not given"
    if optional(f) and text.lower() in ("none", ""):
        return None
    if kind == "int":
        # decimal digits only: Python's int() also takes "3_0" as 30 and other scripts' digits,
        # which a typo would pass for a value the user did not mean
        if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
            raise UsageError(f"parameter {f.name} must be an integer, got {text!r}")
        return int(text)
    if kind == "bool":
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"parameter {f.name} must be true or false, got {text!r}")
    return text


def parse_param_args(params_cls: type, spec_name: str, items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` strings into typed values for ``params_cls``."""
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise UsageError(f"--param expects KEY=VALUE, got {item!r}")
        if key not in fields:
            allowed = ", ".join(fields) or "(none)"
            raise UsageError(f"spec {spec_name} has no parameter {key!r}; its parameters: {allowed}")
        parsed = parse_value(fields[key], value.strip())
        if key in out and out[key] != parsed:
            raise UsageError(f"--param {key} is given twice ({key}={out[key]} and {key}={parsed}); give it once")
        out[key] = parsed
    return out


def merge_params(from_options: dict[str, Any], from_param: dict[str, Any]) -> dict[str, Any]:
    """The values of the default spec's own options (``--brokers 3``) and of ``--param`` items
    together; one parameter set both ways is refused, naming both (whichever won would be a guess)."""
    for key, value in from_param.items():
        if key in from_options:
            raise UsageError(f"{option_name(key)} {_shown(from_options[key])} and --param {key}={_shown(value)} "
                             f"both set parameter {key}; give one of them")
    return {**from_options, **from_param}


def parse_spark_conf(items: tuple[str, ...]) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` items as Spark settings."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {item!r}: give KEY=VALUE, e.g. spark.executor.memory=8g")
        conf[key.strip()] = value
    return conf


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def option_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def derived_options(params_cls: type) -> list[click.Option]:
    """One click option per parameter of ``params_cls`` (the default spec's own options)."""
    options = []
    for f in dataclasses.fields(params_cls):
        meta = f.metadata
        kind = field_kind(f)
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = meta.get("help", "")
        if kind == "bool":
            options.append(click.Option([option_name(f.name), f"spec_{f.name}"], is_flag=True, default=None,
                                        help=help_text))
            continue
        metavar = "N" if kind == "int" else None
        if meta.get("choices"):
            choices = [str(c) for c in meta["choices"]]
            ptype: Any = click.Choice(choices)
            if len("|".join(choices)) > 40:  # click's [a|b|...] would push --help past 80 columns
                metavar = f.name.upper()
                help_text = f"{help_text}: {', '.join(choices)}"
        else:
            ptype = click.INT if kind == "int" else click.STRING
        shown = "preset default" if default is None else default
        options.append(click.Option([option_name(f.name), f"spec_{f.name}"], type=ptype, default=None,
                                    metavar=metavar, help=f"{help_text} [default: {shown}]"))
    return options
