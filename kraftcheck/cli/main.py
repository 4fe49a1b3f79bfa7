"""Entry point of the ``kraftcheck`` console script.

Ctrl-C and SIGTERM end every command with exit 130, from the first line that runs here: the
handlers are installed before click and the commands are imported (half a second for ``check``,
in which an interrupt used to end in click's "Aborted!" and exit 1, and SIGTERM in the signal's
own exit, 143). Only the interpreter's start comes before; a Ctrl-C then still ends the process
as 130 to the shell, by the signal itself. The click group is ``kraftcheck.cli.group.cli``, also
reachable here as ``cli``.
"""

from __future__ import annotations

import errno
import gc
import sys
from typing import Any

from kraftcheck.checker.explore.stop import install_stop_handlers

EXIT_INTERRUPTED = 130

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


EXIT_NO_VERDICT = 2  # as a usage error: no verdict was reached (never 1, which says "violated")


def main() -> None:
    install_stop_handlers()
    try:
        code = _run()
    except KeyboardInterrupt:
        code = _interrupted()
    except Exception:  # noqa: BLE001 - a bug of kraftcheck's must not exit 1, which reads as "violated"
        code = _internal_error()
    finally:
        # what is left is freed at exit without the cyclic collector: its pass over numba's and
        # the run's objects as the interpreter shuts down took 0.1-0.3 s of every short check
        gc.freeze()
    sys.exit(code)


def _run() -> int:
    """The command line run as click's standalone mode would, except that an interrupt (which
    click turns into "Aborted!" and exit 1) is exit 130."""
    import click

    from kraftcheck.cli.group import cli
    try:
        returned = cli.main(prog_name="kraftcheck", standalone_mode=False)
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):
            return _interrupted()
        click.echo("Aborted!", err=True)  # end of input at a prompt
        return 1
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        _drop_standard_output()
        return EXIT_NO_VERDICT  # the reader of a pipe went away before the command could say its result
    _drop_standard_output_if_gone()
    return returned if isinstance(returned, int) else 0


def _drop_standard_output_if_gone() -> None:
    """Flush standard output now: a reader gone (``kraftcheck check | head -1``) would otherwise
    make the interpreter's own flush at exit print a BrokenPipeError after the exit code is set."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _drop_standard_output()


def _drop_standard_output() -> None:
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _internal_error() -> int:
    """An exception nothing expected: kraftcheck's own bug. Its traceback and a line saying the run
    gives no verdict; exit 2."""
    import traceback
    _say(traceback.format_exc() + "kraftcheck: internal error: the exception above is a bug of kraftcheck's, not a "
         "verdict on the spec (exit 2); please report it with the command that ran\n")
    return EXIT_NO_VERDICT


def _interrupted() -> int:
    """Say so once and exit 130; a second signal while saying it changes nothing."""
    import signal
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    _say("kraftcheck: error: interrupted\n")
    return EXIT_INTERRUPTED


def _say(text: str) -> None:
    """``text`` on standard error, if it is still there (a reader gone, a stream closed: nothing)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def __getattr__(name: str) -> Any:
    if name == "cli":  # imported only when asked for: click is not needed before the handlers
        from kraftcheck.cli.group import cli
        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
