"""The command line's run in a child process whose end the parent sees: a project module that
ends the process while it is imported (``os._exit``, a signal) would otherwise end specgen with
the status it chose, 0 included. Any other end is exit 2, naming the module being imported."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

_channel: int | None = None  # the child's end of the pipe, in the child only


def _say(line: str) -> None:
    if _channel is not None:
        os.write(_channel, f"{line}\n".encode())


def importing(name: str) -> None:
    """Tell the parent a project module is being imported (before the import)."""
    _say(f"importing {name}")


def imported(name: str) -> None:
    """Tell the parent the module's import returned."""
    _say(f"imported {name}")


def supervised(run: Callable[[], int], *, bad_input: int) -> int:
    """``run()``'s status from a child process (``bad_input`` if it ended before reporting one)."""
    global _channel
    if not hasattr(os, "fork"):
        return run()
    sys.stdout.flush()
    sys.stderr.flush()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the whole command, then its status, then a quiet end
        os.close(reader)
        _channel = writer
        try:
            status = run()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        _say(f"done {status}")
        os._exit(status)  # the parent's atexit handlers are the parent's to run
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        last = (pipe.read().decode("utf-8", "replace").splitlines() or [""])[-1]
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if last.startswith("done "):
        return int(last.removeprefix("done "))
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    where = f" while importing {last.removeprefix('importing ')!r}" * last.startswith("importing ")
    print(
        f"specgen: the process ended{where} ({how}); nothing was checked or written. Remove what "
        "ends it from the table, kinds or format module's top level and run again",
        file=sys.stderr,
    )
    return bad_input
