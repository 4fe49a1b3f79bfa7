"""Entry point of the ``kraftcheck`` console script.

Ctrl-C, SIGTERM and SIGHUP end every command with exit 130 and the line "kraftcheck: error: interrupted".
Before this module's first lines only the interpreter's start runs, and the import of the two
packages above it, ``kraftcheck`` and ``kraftcheck.cli``, which import nothing (their names are
imported on first use); a signal then gets its default action (Ctrl-C: a KeyboardInterrupt
traceback, exit 1; SIGTERM: 143). The first lines here install a handler that needs only
``signal``: while the rest of this module imports (the stop handlers, ``diagnostics``), a signal ends the process
with exit 130 at once. Its last lines put the handlers before back (a test importing ``cli`` keeps
its own); the console script calls ``main`` next, whose first line installs the stop handlers
(``checker.stop``): from there, while click and the command import (half a second for
``check``) and while a run runs, a signal stops it cleanly, exit 130; once the command is over, a
signal ends the process at once with the command's exit code. Its second line makes
standard error forgiving (``diagnostics``): losing it loses only what it says, never the verdict,
the summary on standard output or the exit code. The click group is ``kraftcheck.cli.group.cli``, also reachable
here as ``cli``.
"""

from __future__ import annotations

import signal as _signal

EXIT_INTERRUPTED = 130


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Exit 130 at once: nothing has started that a stop would have to save."""
    import os
    for each in _STOP_SIGNALS:
        _signal.signal(each, _signal.SIG_IGN)
    try:
        os.write(2, b"kraftcheck: error: interrupted\n")
    except OSError:
        pass
    raise SystemExit(EXIT_INTERRUPTED)


# checker.stop's STOP_SIGNALS, said again here: that module is imported only once these handlers are in
_HANGUP = (_signal.SIGHUP,) if hasattr(_signal, "SIGHUP") else ()
_STOP_SIGNALS = (_signal.SIGINT, _signal.SIGTERM) + _HANGUP
# SIGINT (a background job of a non-interactive shell) and SIGHUP (nohup) left ignored if they are, as
# install_stop_handlers does; the handlers before are put back at the end of this module (below), so
# that importing it changes nothing
_handlers_before = {each: _signal.getsignal(each) for each in _STOP_SIGNALS}
for _each in _STOP_SIGNALS:
    if _each == _signal.SIGTERM or _handlers_before[_each] is not _signal.SIG_IGN:
        _signal.signal(_each, _interrupted_while_starting)

import errno  # noqa: E402 - after the handlers, so that an interrupt while these import is exit 130
import gc  # noqa: E402
import sys  # noqa: E402
from typing import Any, Optional  # noqa: E402

from kraftcheck.checker.stop import install_stop_handlers  # noqa: E402
from kraftcheck.cli.diagnostics import forgive_standard_error, raw_standard_error  # noqa: E402

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
    forgive_standard_error()
    code = None
    try:
        code = _run()
    except SystemExit as e:  # how check, ci, sweep and trace end: sys.exit(their code)
        if e.code is not None and not isinstance(e.code, int):
            raise  # a message for the interpreter to print (exit 1)
        code = e.code or 0
    except KeyboardInterrupt:
        code = _interrupted()
    except Exception:  # noqa: BLE001 - a bug of kraftcheck's must not exit 1, which reads as "violated"
        code = _internal_error()
    finally:
        _drop_standard_streams_if_gone()
        # the command is over, its result said and its files written: a signal now (Ctrl-C, a
        # scheduler's SIGTERM) can change none of that, nor the exit code. The stop handler raised
        # it in the interpreter's exit (a traceback), and once the exit had put the default
        # actions back it killed the process: 143 or 130 after a report that said "holds". It
        # ends the process at once, with the command's code (an exit that waits on something
        # stays stoppable)
        _stop_signals_exit_with(code)
        # what is left is freed at exit without the cyclic collector: its pass over numba's and
        # the run's objects as the interpreter shuts down took 0.1-0.3 s of every short check
        gc.freeze()
    sys.exit(code)


def _run() -> int:
    """The command line run as click's standalone mode would, except that an interrupt (which
    click turns into "Aborted!" and exit 1) is exit 130, and a reader gone from standard output
    before the command said its result (which click turns into exit 1, "violated", even outside
    its standalone mode, wrapping standard output as it does) is exit 2, no verdict."""
    import click

    from kraftcheck.cli.group import cli
    stdout, stderr = sys.stdout, sys.stderr
    try:
        returned = cli.main(prog_name="kraftcheck", standalone_mode=False)
    except SystemExit as e:
        if e.code == 1 and sys.stdout is not stdout and type(sys.stdout).__name__ == "_PacifyFlushWrapper":
            sys.stdout, sys.stderr = stdout, stderr
            _drop_stream(stdout)
            return EXIT_NO_VERDICT
        raise
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):
            return _interrupted()
        click.echo("Aborted!", err=True)  # end of input at a prompt
        return 1
    except click.ClickException as e:
        try:
            e.show()
        except (OSError, ValueError):
            pass  # standard error is gone: the exit code still says it
        return e.exit_code
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        _drop_stream(sys.stdout)
        return EXIT_NO_VERDICT  # the reader of a pipe went away before the command could say its result
    return returned if isinstance(returned, int) else 0


def _drop_standard_streams_if_gone() -> None:
    """Flush standard output and standard error now: a reader gone (``kraftcheck check | head -1``)
    or a full device (``2>/dev/full``) would otherwise make the interpreter's own flush at exit
    print "Exception ignored ... BrokenPipeError" after the exit code is set, or change it."""
    for stream in (sys.stdout, raw_standard_error()):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            _drop_stream(stream)


def _drop_stream(stream: Any) -> None:
    """What is still buffered for ``stream``, and anything later, goes to the null device."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (AttributeError, OSError, ValueError):
        pass


def _internal_error() -> int:
    """An exception nothing expected: kraftcheck's own bug. Its traceback and a line saying the run
    gives no verdict; exit 2."""
    import traceback
    _say(traceback.format_exc() + "kraftcheck: internal error: the exception above is a bug of kraftcheck's, not a "
         "verdict on the spec (exit 2); please report it with the command that ran\n")
    return EXIT_NO_VERDICT


def _ignore_stop_signals() -> None:
    for signum in _STOP_SIGNALS:
        _signal.signal(signum, _signal.SIG_IGN)


def _stop_signals_exit_with(code: Optional[int]) -> None:
    """From now on a stop signal ends the process at once with exit ``code`` (None: the command
    ended in an exception on its way out, whose code only the interpreter knows; ignored then)."""
    if code is None:
        _ignore_stop_signals()
        return
    import os

    def exit_now(*_: Any) -> None:
        os._exit(code)  # the streams were flushed: nothing the command said is lost

    for signum in _STOP_SIGNALS:
        _signal.signal(signum, exit_now)


def _interrupted() -> int:
    """Say so once and exit 130; a second signal while saying it changes nothing."""
    _ignore_stop_signals()
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


# main's first line installs the stop handlers; a process that only imports this module (a test, a
# program calling ``cli``) keeps its own
for _signum, _handler in _handlers_before.items():
    if _handler is not None:
        _signal.signal(_signum, _handler)


if __name__ == "__main__":
    main()
