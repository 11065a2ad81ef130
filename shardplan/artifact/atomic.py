"""Atomic file writes: readers see the old bytes or the new ones, never a torn file.

The bytes are staged beside the target and renamed over it by ``staging.py``, the one
staging primitive this writer and the generator share (standard library only): see
there how a writer killed at any point (``kill -9`` included) leaves no temporary file
behind, and how the next write into the folder removes what a kill between two system
calls can leave. This module adds what an artifact's path asks: a symlink is followed,
anything that is not a regular file is refused, an existing file keeps its mode, and
every failure is an ArtifactWriteError naming the target.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from shardplan.artifact import staging
from shardplan.errors import ArtifactWriteError

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, atomically: the old bytes stay until the new are synced.

    A symlink is followed: the file it points to is replaced and the link kept. An
    existing file keeps its permission bits; a new one gets what ``open()`` would give.
    Anything at the path that is not a regular file (a folder, a FIFO, a device, a
    socket) is refused and left untouched. Any failure (a bad path too: a NUL byte, a
    name too long) raises ArtifactWriteError naming ``path`` (not the temporary file)
    and leaves the old file as it was and no temporary file behind.
    """
    target = Path(path)
    try:
        if "\0" in os.fspath(path):
            raise _refusal(path, errno.EINVAL, "the path contains a NUL byte")
        if target.is_symlink():
            target = Path(os.path.realpath(path))
        mode = _existing_mode(path, target)
        staging.remove_stale_temporaries(target.parent)
        folder = staging.open_folder(target.parent)
        try:
            staged = staging.stage(target.parent, data, mode, folder)
            try:
                staged.replace(target)
            finally:
                staged.discard()
            staging.sync_folder(folder)
        finally:
            if folder >= 0:
                os.close(folder)
    except ArtifactWriteError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a path the OS cannot encode
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
        code = exc.errno if isinstance(exc, OSError) else errno.EINVAL
        if isinstance(exc, FileNotFoundError) and not target.parent.is_dir():
            reason = f"the folder {target.parent} does not exist"
        raise _refusal(path, code, reason) from None


def _refusal(path: str | os.PathLike[str], code: int | None, reason: str) -> ArtifactWriteError:
    text = os.fspath(path)
    shown = repr(text) if "\0" in text else text  # a NUL would cut the message short
    error = ArtifactWriteError(code, f"cannot write {shown}: {reason}")
    error.filename = text
    return error


def _existing_mode(path: Path, target: Path) -> int | None:
    """The permission bits of the regular file at ``target``, None if there is none;
    refuse anything else that is there."""
    try:
        found = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory")  # replace() says it of the temp
    if not stat.S_ISREG(found.st_mode):
        kind = _KINDS.get(stat.S_IFMT(found.st_mode), "a file of another kind")
        raise _refusal(
            path, errno.EINVAL, f"{target} is {kind}, not a regular file: it is left as it is"
        )
    return stat.S_IMODE(found.st_mode)
