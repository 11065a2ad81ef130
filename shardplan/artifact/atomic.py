"""Atomic file writes: readers see the old bytes or the new ones, never a torn file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from shardplan.errors import ArtifactWriteError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    A symlink is followed: the file it points to is replaced and the link kept. An
    existing file keeps its permission bits; a new one gets what ``open()`` would give.
    Any failure raises ArtifactWriteError naming ``path`` (not the temporary file) and
    leaves no temporary file behind.
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    tmp_name = None
    try:
        if target.is_dir():
            raise IsADirectoryError(21, "Is a directory")  # replace() would say it of the temp
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp_name, mode)  # mkstemp creates 0600
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError) and not target.parent.is_dir():
            reason = f"the folder {target.parent} does not exist"
        error = ArtifactWriteError(exc.errno, f"cannot write {path}: {reason}")
        error.filename = str(path)
        raise error from None
    finally:
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
