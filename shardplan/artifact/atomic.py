"""Atomic file writes: readers see the old bytes or the new ones, never a torn file.

A writer killed at any point (``kill -9`` included) leaves no temporary file behind:

* On Linux the new bytes go to an unnamed file (``O_TMPFILE`` in the target's folder):
  written, synced, then given a short name and at once renamed over the target. A
  killed writer's unnamed file has no name to leave; the kernel frees it. Linux has no
  call that links an unnamed file over an existing name, so between the link and the
  rename (two system calls, a few microseconds) a kill leaves that short name behind.
* Elsewhere, or where the file system refuses ``O_TMPFILE``, the bytes go to a short
  named temporary file, removed on any failure.

Either name is ``.shardplan-<pid>-<12 hex digits>.tmp`` (35 characters at most, so a
target name of up to 255 characters still writes), and its writer holds a ``flock`` on
it from before it has a name. Every write first removes such files in its folder whose
lock is free and whose writer process is gone: what a killed writer left lives until
the next write into that folder.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
from pathlib import Path

from shardplan.errors import ArtifactWriteError

if sys.platform != "win32":
    import fcntl

_TEMP_NAME = re.compile(r"\.shardplan-([0-9]{1,10})-[0-9a-f]{12}\.tmp")

# What open(2) answers when the file system (or an old kernel) has no O_TMPFILE.
_NO_UNNAMED_FILES = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)

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
        _remove_stale_temporaries(target.parent)
        folder = _open_folder(target.parent)
        try:
            if not _write_unnamed(folder, target, data, mode):
                _write_named(target, data, mode)
            _sync_folder(folder)
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


# The temporary names this process's writers hold right now (any thread's): a file named
# with this process's pid and not in here is a dead predecessor's (containers reuse pids).
_IN_FLIGHT: set[str] = set()


def _temp_name(folder: Path) -> Path:
    """A new temporary name in ``folder``, registered in _IN_FLIGHT: discard it when done."""
    name = f".shardplan-{os.getpid()}-{secrets.token_hex(6)}.tmp"
    _IN_FLIGHT.add(name)
    return folder / name


def _open_folder(folder: Path) -> int:
    """A descriptor of ``folder``, to link into and to sync; -1 where none can be had."""
    if sys.platform == "win32":
        return -1
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _write_unnamed(folder: int, target: Path, data: bytes, mode: int | None) -> bool:
    """Write through an unnamed file, link it and rename it over ``target``; False where
    unnamed files are not available (then nothing was written)."""
    if sys.platform != "linux" or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        # 0o666 lets the umask decide, as open() does; an existing file's bits come later.
        fd = os.open(
            ".",
            os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC,
            0o666 if mode is None else 0o600,
            dir_fd=folder,
        )
    except OSError as exc:
        if exc.errno in _NO_UNNAMED_FILES:
            return False
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # before it has a name: no cleaner takes it
        _write_synced(fd, data, mode)
        name = _temp_name(target.parent)
        try:
            # linkat(AT_SYMLINK_FOLLOW) through /proc needs no privilege; the dir_fd is what
            # makes os.link call linkat (a plain link() would link the /proc entry itself).
            os.link(f"/proc/self/fd/{fd}", name.name, dst_dir_fd=folder, follow_symlinks=True)
            try:
                os.replace(name, target)  # right after the link: the one window a kill leaves
            except BaseException:
                name.unlink(missing_ok=True)
                raise
        finally:
            _IN_FLIGHT.discard(name.name)
    finally:
        os.close(fd)
    return True


def _write_named(target: Path, data: bytes, mode: int | None) -> None:
    """Write through a short named temporary file, renamed over ``target``."""
    name = _temp_name(target.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), 0o666 if mode is None else 0o600)
    except BaseException:
        _IN_FLIGHT.discard(name.name)
        raise
    replaced = False
    try:
        try:
            if sys.platform != "win32":
                fcntl.flock(fd, fcntl.LOCK_EX)  # the pid in the name covers the moment before
            _write_synced(fd, data, None)
        finally:
            os.close(fd)  # before the rename: Windows renames no open file
        if mode is not None:
            os.chmod(name, mode)
        os.replace(name, target)
        replaced = True
    finally:
        if not replaced:
            name.unlink(missing_ok=True)
        _IN_FLIGHT.discard(name.name)


def _write_synced(fd: int, data: bytes, mode: int | None) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if mode is not None:
        os.fchmod(fd, mode)
    os.fsync(fd)


def _sync_folder(folder: int) -> None:
    """Make the rename durable. A folder that cannot be synced (some file systems refuse
    it, and Windows cannot open one) is left to the file system."""
    if folder < 0:
        return
    try:
        os.fsync(folder)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise


def _remove_stale_temporaries(folder: Path) -> None:
    """Remove the temporary files of writers that died in ``folder``: named like ours,
    unlocked, and stamped with a process id that no longer runs (or with this process's
    id, but written by none of its threads)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # the write itself reports a folder it cannot use
    for entry in entries:
        match = _TEMP_NAME.fullmatch(entry.name)
        if match and _writer_gone(int(match[1]), entry.name):
            _remove_if_unlocked(entry.path)


def _writer_gone(pid: int, name: str) -> bool:
    if pid == os.getpid():
        return name not in _IN_FLIGHT
    return not _process_runs(pid)


def _process_runs(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # os.kill on Windows would end the process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # it runs as another user (or the name is not a pid: leave it)
    return True


def _remove_if_unlocked(name: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(name)
    except OSError:
        return  # locked: its writer lives; or someone else removed it first
    finally:
        os.close(fd)
