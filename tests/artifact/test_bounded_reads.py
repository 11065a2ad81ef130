"""load_meta reads only a regular file, and only up to a cap (issue 26, point 3): anything
else is a MetaError naming the path and the fix, at once, never a hang or a MemoryError.

A read that blocks runs in a thread the test waits for at most a few seconds, so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import socket
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from shardplan.artifact import jsoncodec, meta as meta_module
from shardplan.artifact.meta import CodegenMeta, dump_meta, load_meta, meta_to_bytes
from shardplan.errors import MetaError

META = CodegenMeta(param_plan={"m": {"out_names": ["y"]}})
SIZE = len(meta_to_bytes(META))


def refused_within_a_second(read: Callable[[], object]) -> MetaError:
    """The MetaError ``read`` raises; fails if it returns, raises anything else, or takes
    more than a second."""
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(read())
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(timeout=1.0)
    assert not reader.is_alive(), "load_meta blocked for more than a second"
    assert len(outcome) == 1 and isinstance(outcome[0], MetaError), outcome
    return outcome[0]


def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "codegen_meta.json"
    os.mkfifo(fifo)
    try:
        error = refused_within_a_second(lambda: load_meta(fifo))
    finally:  # a reader blocked in open() by a regression: give it a writer, so it ends
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader waiting: the expected case
    assert str(error) == (
        f"cannot read {fifo}: it is a FIFO, not a regular file, and load_meta reads only "
        "regular files: write the artifact to a file and load that"
    )


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_is_refused_at_once_not_read_until_memory_runs_out() -> None:
    error = refused_within_a_second(lambda: load_meta("/dev/zero"))
    assert "cannot read /dev/zero: it is a character device, not a regular file" in str(error)


def test_a_socket_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        error = refused_within_a_second(lambda: load_meta(path))
    assert f"cannot read {path}: it is a socket, not a regular file" in str(error)


def test_a_folder_is_refused_naming_it_and_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(MetaError) as caught:
        load_meta(tmp_path)
    assert str(caught.value) == (
        f"cannot read {tmp_path}: it is a folder, not a file: pass the path of the "
        "codegen_meta.json in it"
    )


def test_a_symlink_to_a_fifo_is_refused_as_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "codegen_meta.json").symlink_to("fifo")
    error = refused_within_a_second(lambda: load_meta(tmp_path / "codegen_meta.json"))
    assert "it is a FIFO" in str(error)


def test_a_file_above_the_cap_is_refused_naming_its_size_and_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "codegen_meta.json"
    dump_meta(META, path)
    with pytest.raises(MetaError) as caught:
        load_meta(path, max_bytes=SIZE - 1)
    assert str(caught.value) == (
        f"cannot read {path}: it holds {SIZE:,} bytes, more than the {SIZE - 1:,} load_meta "
        f"reads (max_bytes={SIZE - 1}): if it is an artifact, pass a larger cap, "
        "load_meta(path, max_bytes=...)"
    )


def test_a_file_of_exactly_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "codegen_meta.json"
    dump_meta(META, path)
    assert load_meta(path, max_bytes=SIZE) == META


def test_the_default_cap_is_the_module_constant_at_the_time_of_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "codegen_meta.json"
    dump_meta(META, path)
    assert meta_module.MAX_FILE_BYTES == 1 << 30
    monkeypatch.setattr(meta_module, "MAX_FILE_BYTES", SIZE - 1)
    with pytest.raises(MetaError, match=r"more than the .* load_meta reads \(MAX_FILE_BYTES\)"):
        load_meta(path)
    assert load_meta(path, max_bytes=SIZE) == META  # the argument wins


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc here")
def test_a_file_that_reports_no_size_is_still_read_no_further_than_the_cap() -> None:
    # /proc files are regular files of size 0 that hold text: the read itself is bounded.
    with pytest.raises(MetaError) as caught:
        load_meta("/proc/self/status", max_bytes=10)
    assert str(caught.value).startswith(
        "cannot read /proc/self/status: it holds more than the 10 bytes load_meta reads"
    )


@pytest.mark.parametrize("cap", [-1, 1.5, "10", True])
def test_a_cap_that_is_not_a_byte_count_is_a_meta_error(cap: object, tmp_path: Path) -> None:
    with pytest.raises(MetaError, match="max_bytes: expected a number of bytes"):
        load_meta(tmp_path / "x.json", max_bytes=cap)  # type: ignore[arg-type]


def test_running_out_of_memory_while_reading_is_a_meta_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "codegen_meta.json"
    dump_meta(META, path)

    def out_of_memory(raw: object) -> object:
        raise MemoryError

    monkeypatch.setattr(jsoncodec, "decode", out_of_memory)
    with pytest.raises(MetaError) as caught:
        load_meta(path)
    assert str(caught.value) == (
        f"cannot read {path}: not enough memory to read it; free memory, or load it on a "
        "machine with more"
    )
    assert caught.value.__context__ is None  # the frames holding the bytes are gone


# --------------------------------------------------------------- memory a read holds


def test_a_read_holds_at_most_three_and_a_half_files_beyond_the_document(tmp_path: Path) -> None:
    """What load_meta allocates besides the document it returns: the file's bytes, then the
    proof that they are canonical (msgspec's compact encoding and its indented form, each
    about the file's size). Not the 16 MiB a read asking for more than the file would
    allocate to find EOF (15x a 1 MiB file), nor a third copy of the file for the newline
    (4x)."""
    import tracemalloc

    from benchmarks.plans import llama_plan
    from shardplan import api

    path = tmp_path / "codegen_meta.json"
    api.write_plan(llama_plan(250), path)
    size = path.stat().st_size
    load_meta(path)  # the caches of the first read are not the read's
    tracemalloc.start()
    try:
        meta = load_meta(path)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert meta.param_plan
    assert (peak - held) / size < 3.5


def test_a_whole_file_is_read_into_one_buffer_and_never_copied(tmp_path: Path) -> None:
    """The read that finds EOF adds nothing: the bytes the first read gave are returned as
    they are, not joined into a second copy of the file (traced: at most one file's worth)."""
    path = tmp_path / "codegen_meta.json"
    path.write_bytes(b"x" * (4 << 20))
    tracemalloc.start()
    try:
        data = meta_module._read_regular_file(path, 8 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(data) == 4 << 20
    assert peak < 1.5 * (4 << 20)
