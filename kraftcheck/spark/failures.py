"""What a failed Spark call means: the error of the task that failed, a full disk, or a lost driver JVM.

py4j wraps a failed job in ``Py4JJavaError("An error occurred while calling ...collectAndServe")``,
whose text is the whole Java stack; the cause a user can act on is further down: the Python
traceback of the task (a ``PythonException``'s message) or the Java exception the task died of
("Python worker exited unexpectedly", an ``IOException``). ``task_error`` finds it and says it in
one line with where it was raised. A task that found no room for its bytes (a full disk, a quota,
a file size limit: ``disk_full.NO_ROOM``) is that, with its own errno, whichever executor met it,
so the run ends as the local engine's does. A driver whose
Java process is gone (killed, crashed) cannot answer anything more: ``driver_jvm_lost`` tells.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from typing import Any, Optional

from kraftcheck.checker.disk_full import DISK_FULL_ERRNOS, is_disk_full

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
# a task's Python error line (the file it names, if any), for each errno disk_full.NO_ROOM names
_NO_SPACE_ERRNO = re.compile(r"\[Errno (?P<errno>" + "|".join(str(code) for code in DISK_FULL_ERRNOS)
                             + r")\][^\n]*?(?::\s*'(?P<file>[^']*)')?[ \t]*$", re.M)
# a Java one (a shuffle file, a block), by its message
_NO_SPACE = {errno.ENOSPC: re.compile(r"No space left on device"), errno.EDQUOT: re.compile(r"Disk quota exceeded"),
             errno.EFBIG: re.compile(r"File too large")}
_PYSPARK_FRAME = ("pyspark.zip", "/pyspark/", "py4j")


def _chain(error: BaseException) -> list[tuple[str, str, Optional[str]]]:
    """(Java class, message, first stack frame) of the Java exception and each of its causes;
    empty when there is no Java exception or the JVM cannot be asked any more."""
    java = getattr(error, "java_exception", None)
    out: list[tuple[str, str, Optional[str]]] = []
    try:
        while java is not None and len(out) < 20:
            frames = java.getStackTrace()
            where = str(frames[0].toString()) if len(frames) else None
            out.append((str(java.getClass().getName()), str(java.getMessage() or ""), where))
            java = java.getCause()
    except Exception:  # noqa: BLE001: a JVM that went away answers nothing; the text is parsed instead
        pass
    return out


def _python_error(text: str) -> Optional[str]:
    """The last Python traceback in ``text``: its error line, and the innermost frame outside
    PySpark as "(at FILE:LINE, in FUNC)"."""
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    lines = text[at:].splitlines()[1:]
    where, error = None, None
    for i, line in enumerate(lines):
        frame = _FRAME.match(line)
        if frame:
            if not any(p in frame["file"] for p in _PYSPARK_FRAME):
                where = f"{frame['file']}:{frame['line']}, in {frame['func'].strip()}"
            continue
        if line and not line[0].isspace():  # the first unindented line after the frames
            error = line.strip()
            break
    if error is None:
        return None
    return f"{error} (at {where})" if where else error


def task_error(error: BaseException) -> str:
    """One line for a failed Spark call: the failing task's Python error and where it was raised,
    or the Java exception it failed with, and how often Spark tried it."""
    chain = _chain(error)
    whole = _text(error)
    text = "\n".join(message for _, message, _ in chain) or whole
    python = _python_error(text)
    attempts = re.search(r"Task (\d+) in stage ([\d.]+) failed (\d+) times?", text + "\n" + whole)
    tried = f"task {attempts[1]} of stage {attempts[2]} failed {attempts[3]} time" + \
        ("s" if attempts[3] != "1" else "") + ": " if attempts else ""
    if python:
        return tried + python
    # the task's own Java failure: the first cause below Spark's "Job aborted" wrapper
    for cls, message, where in chain:
        if message.startswith("Job aborted due to stage failure"):
            continue
        first = message.strip().splitlines()[0] if message.strip() else ""
        name = cls.rsplit(".", 1)[-1]
        return tried + (f"{name}: {first}" if first else name) + (f" (at {where})" if where else "")
    lines = [line.strip() for line in whole.splitlines() if line.strip()]
    return tried + (lines[0] if lines else type(error).__name__)


def _text(error: BaseException) -> str:
    """``str(error)``: py4j's asks the JVM for the Java stack, which may be gone."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001
        return type(error).__name__


def disk_full(error: BaseException) -> Optional[OSError]:
    """The full disk ``error`` reports (``disk_full.is_disk_full``, raised here or by a task),
    as an ``OSError`` naming the file where known; None for any other error."""
    if is_disk_full(error):
        return error
    if not type(error).__module__.startswith(("py4j", "pyspark")):
        return None
    text = "\n".join(message for _, message, _ in _chain(error)) or _text(error)
    found = _NO_SPACE_ERRNO.search(text)
    if found:
        code = int(found.group("errno"))
        return OSError(code, os.strerror(code), found.group("file"))
    code = next((code for code, message in _NO_SPACE.items() if message.search(text)), None)
    return None if code is None else OSError(code, os.strerror(code))


JVM_EXIT_WAIT_S = 1.0  # how long an error is given to turn out a JVM's death


def driver_jvm_lost(error: BaseException, sc: Any = None) -> bool:
    """Whether ``error`` means the driver's Java process is gone: py4j cannot reach it, or the
    process PySpark started for it has ended."""
    gateway = getattr(type(sc), "_gateway", None) if sc is not None else None
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        # a JVM killed mid-call closes its sockets while it exits: the error (PySpark's own, at
        # times an UnboundLocalError from reading the socket) can come before the process is gone
        try:
            proc.wait(timeout=JVM_EXIT_WAIT_S)
            return True
        except subprocess.TimeoutExpired:
            pass
    try:
        from py4j.protocol import Py4JNetworkError
    except ImportError:
        return False
    return isinstance(error, (Py4JNetworkError, ConnectionError)) or \
        "Answer from Java side is empty" in str(error)
