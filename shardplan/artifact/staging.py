"""Staging new bytes beside a file, then putting them in place: the one write contract of
the artifact writer (``shardplan/artifact/atomic.py``) and the generator (``generator/emit.py``).

A staged file is written and synced before anything else happens; putting it in place is
a rename over the target, so readers see the old bytes or the new ones, never a torn file.
A writer killed at any point (``kill -9`` included) leaves no temporary file behind:

* On Linux the bytes go to an unnamed file (``O_TMPFILE`` in the target's folder). A
  killed writer's unnamed file has no name to leave; the kernel frees it. Linux has no
  call that links an unnamed file over an existing name, so putting it in place links it
  under a short name and at once renames that over the target: a kill between those two
  system calls (a few microseconds) leaves the short name behind.
* Elsewhere, or where the file system refuses ``O_TMPFILE``, the bytes go to a short
  named temporary file, removed on any failure.

Either name is ``.shardplan-<pid>-<12 hex digits>.tmp`` (35 characters at most, so a
target name of up to 255 characters still writes), and its writer holds a ``flock`` on
it from before it has a name. ``remove_stale_temporaries`` removes such files in a folder
whose lock is free and whose writer process is gone; both writers call it before they
write, so what a killed writer left lives until the next write into that folder.

Standard library only, and nothing of ``shardplan`` but its package: the runtime imports it
without the generator's dependencies, and the generator imports it when it writes, after it
has loaded the project's own ``shardplan`` from the project it renders.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
from pathlib import Path

if sys.platform != "win32":
    import fcntl

TEMP_NAME = re.compile(r"\.shardplan-([0-9]{1,10})-[0-9a-f]{12}\.tmp")

# What open(2) answers when the file system (or an old kernel) has no O_TMPFILE.
_NO_UNNAMED_FILES = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)

# The temporary names this process's writers hold right now (any thread's): a file named
# with this process's pid and not in here is a dead predecessor's (containers reuse pids).
IN_FLIGHT: set[str] = set()


def temp_name(folder: Path) -> Path:
    """A new temporary name in ``folder``, registered in IN_FLIGHT: ``release`` it when done."""
    name = f".shardplan-{os.getpid()}-{secrets.token_hex(6)}.tmp"
    IN_FLIGHT.add(name)
    return folder / name


def release(name: Path) -> None:
    """Forget a name of ``temp_name``: from now on a cleaner may take a file left under it."""
    IN_FLIGHT.discard(name.name)


class StagedFile:
    """New bytes, written and synced in a folder, not yet in place: ``replace`` a target
    with them, or ``discard`` them. Either closes the file; both may be called again."""

    def __init__(self, folder: Path, fd: int, name: Path | None, folder_fd: int) -> None:
        self._folder = folder
        self._fd = fd  # the open unnamed file; -1 for a named one (closed once written)
        self._name = name  # the named temporary file; None for an unnamed one
        self._folder_fd = folder_fd

    def replace(self, target: Path) -> None:
        """Rename the new bytes over ``target`` (in the folder they were staged in)."""
        if self._name is None:
            name = temp_name(self._folder)
            try:
                # linkat(AT_SYMLINK_FOLLOW) through /proc needs no privilege; the dir_fd is
                # what makes os.link call linkat (link() would link the /proc entry itself).
                os.link(
                    f"/proc/self/fd/{self._fd}",
                    name.name,
                    dst_dir_fd=self._folder_fd,
                    follow_symlinks=True,
                )
                try:
                    os.replace(name, target)  # right after the link: the one window a kill leaves
                except BaseException:
                    name.unlink(missing_ok=True)
                    raise
            finally:
                release(name)
                self.discard()
            return
        os.replace(self._name, target)
        release(self._name)
        self._name = None

    def discard(self) -> None:
        """Drop the new bytes: close the unnamed file, or remove the named one."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        if self._name is not None:
            name, self._name = self._name, None
            try:
                name.unlink(missing_ok=True)
            finally:
                release(name)


def stage(folder: Path, data: bytes, mode: int | None = None, folder_fd: int = -1) -> StagedFile:
    """Write ``data`` to a new temporary file in ``folder`` and sync it.

    ``mode``: the permission bits to give it (an existing target's); None gives what
    ``open()`` would. ``folder_fd``: a descriptor of ``folder`` (``open_folder``), without
    which the file is a named one. Raises OSError, with nothing left behind.
    """
    if folder_fd >= 0:
        fd = _open_unnamed(folder_fd, mode)
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # before it has a name: no cleaner takes it
                _write_synced(fd, data, mode)
            except BaseException:
                os.close(fd)
                raise
            return StagedFile(folder, fd, None, folder_fd)
    name = temp_name(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), 0o666 if mode is None else 0o600)
    except BaseException:
        release(name)
        raise
    staged = StagedFile(folder, -1, name, folder_fd)
    try:
        try:
            if sys.platform != "win32":
                fcntl.flock(fd, fcntl.LOCK_EX)  # the pid in the name covers the moment before
            _write_synced(fd, data, None)
        finally:
            os.close(fd)  # before the rename: Windows renames no open file
        if mode is not None:
            os.chmod(name, mode)
    except BaseException:
        staged.discard()
        raise
    return staged


def _open_unnamed(folder_fd: int, mode: int | None) -> int:
    """An unnamed file in the folder, open for writing; -1 where there are none."""
    if sys.platform != "linux" or not os.path.isdir("/proc/self/fd"):
        return -1
    try:
        # 0o666 lets the umask decide, as open() does; an existing file's bits come later.
        return os.open(
            ".",
            os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC,
            0o666 if mode is None else 0o600,
            dir_fd=folder_fd,
        )
    except OSError as exc:
        if exc.errno in _NO_UNNAMED_FILES:
            return -1
        raise


def _write_synced(fd: int, data: bytes, mode: int | None) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if mode is not None:
        os.fchmod(fd, mode)
    os.fsync(fd)


def open_folder(folder: Path) -> int:
    """A descriptor of ``folder``, to stage unnamed files in and to sync; -1 where none
    can be had (Windows)."""
    if sys.platform == "win32":
        return -1
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def sync_folder(folder_fd: int) -> None:
    """Make the renames into the folder durable. A folder that cannot be synced (some file
    systems refuse it, and Windows cannot open one) is left to the file system."""
    if folder_fd < 0:
        return
    try:
        os.fsync(folder_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise


def remove_stale_temporaries(folder: Path) -> None:
    """Remove the temporary files of writers that died in ``folder``: named like ours,
    unlocked, and stamped with a process id that no longer runs (or with this process's
    id, but written by none of its threads)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # the write itself reports a folder it cannot use
    for entry in entries:
        match = TEMP_NAME.fullmatch(entry.name)
        if match and _writer_gone(int(match[1]), entry.name):
            _remove_if_unlocked(entry.path)


def _writer_gone(pid: int, name: str) -> bool:
    if pid == os.getpid():
        return name not in IN_FLIGHT
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
