"""dump_meta's atomic write (issue 19, points 8 and 9): a writer killed at any point
leaves the old bytes or the new ones and no temporary file; any valid name writes;
anything at the path that is not a regular file is refused and left as it is.

Real processes: the writers that are killed (kill -9 cannot be tried in the test's own
process).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shardplan.artifact import staging
from shardplan.artifact.meta import CodegenMeta, dump_meta, meta_to_bytes
from shardplan.errors import ArtifactWriteError
from tests.helpers import REPO

# A writer process without torch: it writes two metas of about 4 MB in turn, forever. Its
# fsync of a file takes 50 ms more, a disk's pace (the page cache here syncs 4 MB in a few
# ms), so most kills land while a write is under way. It prints the sha256 of both metas'
# bytes first; "named" has it run without O_TMPFILE, as on a file system that refuses it.
WRITER = """
import errno, hashlib, os, stat, sys, time
from shardplan.artifact.meta import CodegenMeta, dump_meta, meta_to_bytes

real_fsync = os.fsync
def disk_paced_fsync(fd):
    if stat.S_ISREG(os.fstat(fd).st_mode):
        time.sleep(0.05)
    real_fsync(fd)
os.fsync = disk_paced_fsync

if sys.argv[2] == "named":
    real_open = os.open
    def refuse_unnamed(path, flags, *args, **kwargs):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)
    os.open = refuse_unnamed

metas = [
    CodegenMeta(param_plan={f"m{i}": {"out_names": [letter * 10_000]} for i in range(400)})
    for letter in "ab"
]
print(*(hashlib.sha256(meta_to_bytes(m)).hexdigest() for m in metas), flush=True)
while True:
    for meta in metas:
        dump_meta(meta, sys.argv[1])
"""

KILLS = 12
OLD = b'{"old": true}\n'


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def meta() -> CodegenMeta:
    return CodegenMeta(param_plan={"m": {"out_names": ["y"]}})


def others(folder: Path, target: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != target.name)


def start_writer(target: Path, how: str) -> tuple[subprocess.Popen[str], set[str]]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target), how],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    line = writer.stdout.readline()
    assert line, "the writer process died before it started writing"
    return writer, set(line.split())


def kill_at_random(writer: subprocess.Popen[str], rng: random.Random, folder: Path) -> bool:
    """SIGKILL ``writer`` at a random moment; whether it had a file in ``folder`` open then."""
    time.sleep(rng.uniform(0.0, 0.2))  # a few writes long
    writing = _has_file_open_in(writer.pid, folder)
    writer.send_signal(signal.SIGKILL)
    writer.wait()  # reaped: its pid no longer runs
    return writing


def _has_file_open_in(pid: int, folder: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    opened = []
    for fd in fds.iterdir() if fds.is_dir() else ():
        try:
            opened.append(os.readlink(fd))
        except OSError:
            continue  # closed meanwhile
    return any(name.startswith(f"{folder}/") for name in opened)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(OLD)
    return path


def test_the_writer_process_does_not_import_torch() -> None:
    """The kill tests stay fast only while dump_meta's module leaves torch alone."""
    probe = "import sys, shardplan.artifact.meta; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.processes
def test_a_writer_killed_at_random_points_leaves_only_the_target_never_torn(
    target: Path,
) -> None:
    """Each of KILLS writer processes is killed with SIGKILL at a random moment. After each,
    the target holds the old bytes or one complete new file, and nothing else is in the
    folder.

    One moment is an exception, and the test says so if it hits it: a kill between linking
    the unnamed file and renaming it (two system calls in a row) leaves that short name,
    stamped with the dead writer's pid; the next write into the folder removes it.
    """
    rng = random.Random(19)
    between_link_and_rename = writing = 0
    for kill in range(KILLS):
        before = digest(target.read_bytes())
        writer, new = start_writer(target, "unnamed")
        writing += kill_at_random(writer, rng, target.parent)
        assert digest(target.read_bytes()) in new | {before}, f"kill {kill}: torn"
        left = others(target.parent, target)
        if left:
            assert left == [f for f in left if f.startswith(f".shardplan-{writer.pid}-")]
            assert all(digest((target.parent / f).read_bytes()) in new for f in left)
            between_link_and_rename += 1
            dump_meta(meta(), target)  # the next write cleans up
            assert others(target.parent, target) == [], f"kill {kill}: left {left}"
    assert between_link_and_rename <= 1, "the link-to-rename window is meant to be tiny"
    assert writing >= KILLS // 4, f"only {writing} of {KILLS} kills landed in a write"


@pytest.mark.processes
def test_a_killed_writer_without_unnamed_files_is_cleaned_up_by_the_next_write(
    target: Path,
) -> None:
    """Where the file system refuses O_TMPFILE, a killed writer's named temporary file
    stays until the next write into the folder, which removes it; the target is never
    torn."""
    rng = random.Random(9)
    writing = 0
    for kill in range(KILLS):
        before = digest(target.read_bytes())
        writer, new = start_writer(target, "named")
        writing += kill_at_random(writer, rng, target.parent)
        assert digest(target.read_bytes()) in new | {before}, f"kill {kill}: torn"
        left = others(target.parent, target)
        assert all(f.startswith(f".shardplan-{writer.pid}-") for f in left), left
        dump_meta(meta(), target)
        assert others(target.parent, target) == [], f"kill {kill}: left {left}"
        assert target.read_bytes() == meta_to_bytes(meta())
    assert writing >= KILLS // 4, f"only {writing} of {KILLS} kills landed in a write"


# ------------------------------------------------------------------ what is cleaned up


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    return int(done.stdout)


_OUT: dict[str, Any] = {"capture_output": True, "text": True, "check": True}


def test_a_dead_writers_temporary_file_is_removed_by_the_next_write(target: Path) -> None:
    stale = target.parent / f".shardplan-{dead_pid()}-0123456789ab.tmp"
    stale.write_bytes(b"half a fi")
    dump_meta(meta(), target)
    assert others(target.parent, target) == []


def test_a_locked_temporary_file_is_left_to_its_writer(target: Path) -> None:
    """A writer holds its file's lock from before the file has a name: even with a pid that
    no longer runs (another pid namespace, say), a locked file is not taken from it."""
    busy = target.parent / f".shardplan-{dead_pid()}-0123456789ab.tmp"
    busy.write_bytes(b"being written")
    with busy.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        dump_meta(meta(), target)
    assert others(target.parent, target) == [busy.name]


def test_a_temporary_file_of_a_running_process_is_left_alone(target: Path) -> None:
    """Between creating a named temporary file and locking it, only its pid protects it."""
    running = target.parent / f".shardplan-{os.getppid()}-0123456789ab.tmp"
    running.write_bytes(b"being written")
    dump_meta(meta(), target)
    assert others(target.parent, target) == [running.name]


def test_a_file_with_this_processs_pid_that_none_of_its_threads_writes_is_removed(
    target: Path,
) -> None:
    """A restarted container's writer often gets the pid its killed predecessor had."""
    stale = target.parent / f".shardplan-{os.getpid()}-0123456789ab.tmp"
    stale.write_bytes(b"half a fi")
    dump_meta(meta(), target)
    assert others(target.parent, target) == []


def test_a_file_another_thread_of_this_process_writes_is_left_alone(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = target.parent / f".shardplan-{os.getpid()}-0123456789ab.tmp"
    busy.write_bytes(b"being written")
    monkeypatch.setattr(staging, "IN_FLIGHT", {busy.name})
    dump_meta(meta(), target)
    assert others(target.parent, target) == [busy.name]


@pytest.mark.parametrize(
    "name",
    [
        ".codegen_meta.json.x1y2z3.tmp",  # mkstemp's, from older versions: whose, unknown
        ".shardplan-123-short.tmp",
        "shardplan-123-0123456789ab.tmp",
        ".shardplan-123-0123456789ab.tmp.keep",
    ],
)
def test_files_not_named_like_ours_are_never_removed(target: Path, name: str) -> None:
    (target.parent / name).write_bytes(b"not ours")
    dump_meta(meta(), target)
    assert others(target.parent, target) == [name]


def test_the_next_write_skips_a_fifo_named_like_a_temporary_file(target: Path) -> None:
    fifo = target.parent / f".shardplan-{dead_pid()}-0123456789ab.tmp"
    os.mkfifo(fifo)
    dump_meta(meta(), target)  # opening it must not block, and it is not ours to remove
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


# ------------------------------------------------------------------ the named fallback


@pytest.fixture
def no_unnamed_files(monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def refuse_unnamed(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_unnamed)


@pytest.mark.usefixtures("no_unnamed_files")
def test_without_unnamed_files_a_write_keeps_the_mode_and_leaves_no_temporary_file(
    target: Path,
) -> None:
    target.chmod(0o640)
    dump_meta(meta(), target)
    assert target.read_bytes() == meta_to_bytes(meta())
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert others(target.parent, target) == []


@pytest.mark.usefixtures("no_unnamed_files")
def test_without_unnamed_files_a_failed_write_keeps_the_old_file_and_no_temporary_file(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ArtifactWriteError, match="No space left"):
        dump_meta(meta(), target)
    assert target.read_bytes() == OLD
    assert others(target.parent, target) == []


def test_a_failed_rename_of_the_linked_file_leaves_no_name_behind(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: str, dst: str) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ArtifactWriteError, match="Input/output error"):
        dump_meta(meta(), target)
    assert target.read_bytes() == OLD
    assert others(target.parent, target) == []


def test_a_new_file_gets_what_open_would_give(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        dump_meta(meta(), tmp_path / "codegen_meta.json")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "codegen_meta.json").stat().st_mode) == 0o640


# ------------------------------------------------------------------ names and paths


@pytest.mark.parametrize("length", [243, 250, 255])
def test_a_file_name_of_up_to_255_characters_writes(tmp_path: Path, length: int) -> None:
    target = tmp_path / ("n" * length)
    dump_meta(meta(), target)
    dump_meta(meta(), target)  # over an existing file too
    assert target.read_bytes() == meta_to_bytes(meta())
    assert others(tmp_path, target) == []


def test_the_temporary_name_is_short_whatever_the_target(tmp_path: Path) -> None:
    name = staging.temp_name(tmp_path / ("n" * 255))
    assert len(name.name) <= 35 and staging.TEMP_NAME.fullmatch(name.name)  # pid: 7 digits


def test_a_file_name_too_long_is_an_artifact_write_error(tmp_path: Path) -> None:
    target = tmp_path / ("n" * 256)
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), target)
    assert caught.value.errno == errno.ENAMETOOLONG and caught.value.filename == str(target)
    assert "cannot write" in str(caught.value) and list(tmp_path.iterdir()) == []


def test_a_nul_byte_in_the_path_is_an_artifact_write_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), f"{tmp_path}/codegen\0meta.json")
    assert caught.value.errno == errno.EINVAL
    assert "NUL byte" in str(caught.value) and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ not a regular file


def assert_refused_and_untouched(path: Path, kind: str) -> None:
    before = os.lstat(path)
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), path)
    assert f"is {kind}, not a regular file" in str(caught.value)
    assert caught.value.filename == str(path)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_rdev) == (
        before.st_ino,
        before.st_mode,
        before.st_rdev,
    )


def test_a_fifo_at_the_path_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "codegen_meta.json"
    os.mkfifo(fifo)
    assert_refused_and_untouched(fifo, "a FIFO")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and list(tmp_path.iterdir()) == [fifo]


def test_a_symlink_to_a_fifo_is_refused_and_both_are_left(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "codegen_meta.json"
    link.symlink_to(fifo)
    assert_refused_and_untouched(link, "a FIFO")
    assert link.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["codegen_meta.json", "pipe"]


def null_device(folder: Path) -> Path:
    """A node like /dev/null, in ``folder``. Never the real one: before this fix, a write
    through a symlink to /dev/null replaced it with a regular file."""
    node = folder / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    return node


def test_a_device_node_at_the_path_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    node = null_device(tmp_path)
    assert_refused_and_untouched(node, "a character device")
    assert stat.S_ISCHR(node.lstat().st_mode)


def test_a_symlink_to_a_device_node_is_refused_and_the_node_left(tmp_path: Path) -> None:
    node = null_device(tmp_path)
    link = tmp_path / "codegen_meta.json"
    link.symlink_to(node)
    assert_refused_and_untouched(link, "a character device")
    assert stat.S_ISCHR(node.lstat().st_mode) and link.is_symlink()


def test_a_socket_at_the_path_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "s"
    if len(str(path)) > 100:
        pytest.skip("the folder's path is too long for a unix socket")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert_refused_and_untouched(path, "a socket")
    assert stat.S_ISSOCK(path.lstat().st_mode)


def test_a_symlink_to_a_regular_file_is_still_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_bytes(OLD)
    link = tmp_path / "codegen_meta.json"
    link.symlink_to(real)
    dump_meta(meta(), link)
    assert link.is_symlink() and real.read_bytes() == meta_to_bytes(meta())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["codegen_meta.json", "real.json"]
