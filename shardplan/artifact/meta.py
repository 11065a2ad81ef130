"""The artifact: codegen_meta.json I/O for CodegenMeta (docs/contract.md §9).

The JSON form is stable: UTF-8, ``indent=2``, ``sort_keys=True``, one trailing
newline, written atomically. CodegenMeta is generated from the tables
(``generated/meta.py``); top-level keys no row owns are kept in ``extra`` and written
back unchanged.

Writing and reading try the fast path first (jsoncodec: orjson and msgspec, in C), which
gives exactly the standard library's bytes and documents or steps aside; the standard
library path below then runs as before, with the same errors.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardplan.artifact import jsoncodec
from shardplan.artifact.shapes import UNSET
from shardplan.collector import pause_collector, resume_collector
from shardplan.convert.json_values import MAX_DOCUMENT_DEPTH, raise_if_unwritable
from shardplan.errors import MetaError, check_argument, described, json_type, key_path
from shardplan.staleness import generated_modules
from shardplan.table.format import GROUP_PARAM_PLAN

# The document's dataclass is generated from the tables (one field per top-level key the
# plan table owns); a missing generated/meta.py is reported with the command that makes it.
if TYPE_CHECKING:
    from generated.meta import RENAMED, CodegenMeta, check_meta
else:
    (_generated,) = generated_modules("meta")
    RENAMED, CodegenMeta = _generated.RENAMED, _generated.CodegenMeta
    check_meta = _generated.check_meta

KNOWN_KEYS = tuple(f.name for f in fields(CodegenMeta) if f.name != "extra")


def meta_from_dict(data: object) -> CodegenMeta:
    """Build a CodegenMeta from a decoded JSON document, checking top-level types. A key
    under an older name (a row's alias) is read as the field's current name."""
    if not isinstance(data, dict):
        raise MetaError("", f"a codegen meta must be a JSON object, got {json_type(data)}")
    if GROUP_PARAM_PLAN not in data:  # another JSON file: its keys would all ride along
        raise MetaError("", f"not a codegen_meta artifact: no {GROUP_PARAM_PLAN}")
    for old, new in RENAMED.items():
        if old in data:
            if new in data:
                raise MetaError(
                    old, f"{old!r} is an older name of {new!r}, which is given too: keep one"
                )
            data = {(new if key == old else key): value for key, value in data.items()}
    known = {key: data[key] for key in KNOWN_KEYS if key in data}
    extra = {key: value for key, value in data.items() if key not in KNOWN_KEYS}
    meta = CodegenMeta(**known, extra=extra)
    check_meta(meta)
    return meta


def meta_to_dict(meta: CodegenMeta) -> dict[str, Any]:
    """The JSON document of ``meta``: the extra keys plus every field it holds (an UNSET
    field is a key the document does not have)."""
    check_argument(meta, CodegenMeta, "a CodegenMeta", MetaError)
    check_meta(meta)
    # Each field under its own name, the reader's KNOWN_KEYS; check_meta has refused an
    # extra key that is also a field's.
    document = dict(meta.extra)
    for key in KNOWN_KEYS:
        value = getattr(meta, key)
        if value is not UNSET:
            document[key] = value
    return document


def _refuse_deeper_than_written(document: object, source: str) -> None:
    """MetaError for a document whose containers nest deeper than the writer writes (the
    document itself is level 1): reading it, then writing it, would fail."""
    containers = (dict, list)
    stack: list[tuple[Any, int]] = [(document, 1)] if type(document) in containers else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DOCUMENT_DEPTH:
            break
        children = node.values() if type(node) is dict else node
        stack.extend((child, depth + 1) for child in children if type(child) in containers)
    else:
        return
    raise MetaError(
        "", f"{source} nests deeper than {MAX_DOCUMENT_DEPTH} levels, more than the writer writes"
    )


def meta_to_bytes(meta: CodegenMeta) -> bytes:
    """The exact bytes of codegen_meta.json: sorted keys, indent 2, one trailing newline.

    A value JSON cannot write, or would silently change (a non-str key, NaN, a set, a
    cycle), is a MetaError naming its place.
    """
    document = meta_to_dict(meta)
    fast = jsoncodec.encode(document)  # None unless it gives the stdlib bytes below
    if fast is not None:
        return fast
    for key, value in document.items():  # keys: str, checked by meta_to_dict
        where = key if key.isidentifier() else key_path("", key)
        raise_if_unwritable(
            value, where, MetaError, allow_tuples=True, max_depth=MAX_DOCUMENT_DEPTH - 1
        )
    try:
        text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:  # the walk above names the place
        raise MetaError("", f"the meta holds a value JSON cannot write: {exc}") from None
    return (text + "\n").encode("utf-8")


def meta_to_json(meta: CodegenMeta) -> str:
    """The exact text of codegen_meta.json (``meta_to_bytes`` as text)."""
    return meta_to_bytes(meta).decode("utf-8")


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would silently keep the last of two equal keys: refuse instead.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(Exception):
    pass


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e400 parses to inf, which the writer refuses: a reader must refuse it too.
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {text} overflows a float")
    return value


def _parse_strictly(text: str, source: str) -> object:
    # The reader of any valid JSON: compact, unsorted, raw UTF-8, another producer's.
    try:
        return json.loads(
            text,
            object_pairs_hook=_reject_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except _DuplicateKey as exc:
        raise MetaError("", f"{source}: an object repeats the key {exc.args[0]!r}") from None
    except (ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than the decoder's stack allows.
        raise MetaError("", f"{source} is not valid JSON: {exc}") from None


def meta_from_json(text: str, source: str = "<string>") -> CodegenMeta:
    """Parse codegen_meta.json text; any defect is a MetaError naming ``source``."""
    check_argument(text, str, "JSON text, a str (load_meta reads a file)", MetaError)
    check_argument(source, str, "a str", MetaError, "source")
    data = jsoncodec.decode(text)  # None unless text is canonical: then read strictly
    if data is None:
        data = _parse_strictly(text, source)
        _refuse_deeper_than_written(data, source)
    # else: jsoncodec.decode refused a line nested MAX_DOCUMENT_DEPTH deep, its one scan
    return meta_from_dict(data)


_PATH_TYPES = (str, os.PathLike)

# The largest file load_meta reads, unless told otherwise (its max_bytes): 1 GiB, about
# 1.1 million modules of a Llama-style plan. Reading peaks at several times the file, so a
# larger file is more likely a wrong path than an artifact.
MAX_FILE_BYTES = 1 << 30

# What load_meta asks for past the size it found (a file growing, or one that reports no
# size, as /proc's): small, since that read finds EOF with the file read whole.
_READ_ON = 1 << 16

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def load_meta(path: str | Path, *, max_bytes: int | None = None) -> CodegenMeta:
    """Read a codegen_meta.json file. Automatic garbage collection is paused for the call
    (shardplan.collector): the document is one container per JSON object.

    Only a regular file is read, and only up to ``max_bytes`` (default: the module's
    ``MAX_FILE_BYTES`` at the time of the call); a FIFO, a device, a socket or a folder is
    refused without being opened for reading, a larger file before it is read.
    """
    paused = pause_collector()  # first: see shardplan.collector
    try:
        file = file_path(path)
        given = max_bytes is not None
        if max_bytes is None:
            max_bytes = MAX_FILE_BYTES
        elif type(max_bytes) is not int or max_bytes < 0:
            raise MetaError(
                "",
                f"max_bytes: expected a number of bytes (an int >= 0), got {described(max_bytes)}",
            )
        return _load_meta(file, max_bytes, given)
    finally:
        resume_collector(paused)


def file_path(path: object) -> Path:
    """``path`` as a Path, refused (MetaError) unless it names a file: not a str or
    os.PathLike, or empty (``Path("")`` is the current folder, which would be reported
    as a folder that cannot be written)."""
    check_argument(path, _PATH_TYPES, "a file path (str or os.PathLike)", MetaError, "path")
    assert isinstance(path, (str, os.PathLike))
    if os.fspath(path) in ("", b""):
        raise MetaError("", "path: the path is empty; pass the artifact file's path")
    return Path(path)


def _load_meta(path: Path, max_bytes: int, given: bool = False) -> CodegenMeta:
    try:
        return _read_meta(path, max_bytes, given)
    except MemoryError:
        pass  # raised below, outside this handler: the memory the read held is freed first
    raise MetaError(
        "",
        f"cannot read {path}: not enough memory to read it; free memory, or load it on a "
        "machine with more",
    )


def _read_meta(path: Path, max_bytes: int, given: bool) -> CodegenMeta:
    raw = _read_regular_file(path, max_bytes, given)
    data = jsoncodec.decode(raw)  # None unless the file is canonical: then read strictly
    if data is None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetaError("", f"{path} is not UTF-8: {exc}") from None
        data = _parse_strictly(text, str(path))
        _refuse_deeper_than_written(data, str(path))
    # else: jsoncodec.decode refused a line nested MAX_DOCUMENT_DEPTH deep, its one scan
    return meta_from_dict(data)


def read_counted(
    path: str | Path, apart: str, max_bytes: int | None = None
) -> tuple[dict[str, Any], int] | None:
    """The first tier of a read (jsoncodec.decode_counted_apart) for a reader whose own
    pass visits every object: the document of the file at ``path`` and its ':' bytes, the
    object under the top-level key ``apart`` decoded in pieces once the file's bytes are
    gone; or None where that tier cannot say (load_meta's path then decides). The file is
    refused as load_meta refuses it, with the same MetaError; running out of memory is
    None, so load_meta's path says so. The document is the caller's: nobody else holds it."""
    if max_bytes is None:
        max_bytes = MAX_FILE_BYTES
    try:
        cut = jsoncodec.decode_counted_apart(_read_regular_file(Path(path), max_bytes), apart)
        if cut is None:  # the file's bytes are gone here, whatever the answer
            return None
        document, pieces, colons = cut
        del cut
        return (document, colons) if jsoncodec.decode_pieces(document, apart, pieces) else None
    except MemoryError:
        return None


def _read_regular_file(path: Path, max_bytes: int, given: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    Anything else is refused before it is opened (opening a device can act on it), and
    again after, from the open descriptor (the path may have changed in between); the open
    does not block (O_NONBLOCK: a FIFO without a writer would). The read stops one byte
    past the cap, so a file that grows, or reports no size (/proc), is bounded too.
    """
    try:
        _refuse_unless_readable(path, os.stat(path), max_bytes, given)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb", buffering=0) as file:
            found = os.fstat(fd)
            _refuse_unless_readable(path, found, max_bytes, given)
            # One read gives the whole file unless it grew; then read on, up to the cap, in
            # chunks of _READ_ON bytes: a read allocates all it asks for before it finds
            # EOF, which every read of a file that did not grow ends with.
            parts = [file.read(found.st_size + 1)]
            size = len(parts[0])
            while parts[-1] and size <= max_bytes:
                parts.append(file.read(min(max_bytes + 1 - size, _READ_ON)))
                size += len(parts[-1])
            if not parts[-1]:
                parts.pop()  # the read that found EOF: joining it would copy the file
    except MetaError:  # a ValueError too: not a NUL byte
        raise
    except OSError as exc:
        raise MetaError("", f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # a NUL byte in the path
        raise MetaError("", f"cannot read {str(path)!r}: {exc}") from None
    if size > max_bytes:
        _refuse_unless_readable(path, found, max_bytes, given, size)
    return parts[0] if len(parts) == 1 else b"".join(parts)  # b"" for an empty file


def _refuse_unless_readable(
    path: Path, found: os.stat_result, max_bytes: int, given: bool, size: int | None = None
) -> None:
    """MetaError, naming the path and the fix, for what load_meta does not read (``given``:
    the cap is the caller's max_bytes, not MAX_FILE_BYTES)."""
    if stat.S_ISDIR(found.st_mode):
        raise MetaError(
            "",
            f"cannot read {path}: it is a folder, not a file: pass the path of the "
            "codegen_meta.json in it",
        )
    if not stat.S_ISREG(found.st_mode):
        kind = _KINDS.get(stat.S_IFMT(found.st_mode), "a file of another kind")
        raise MetaError(
            "",
            f"cannot read {path}: it is {kind}, not a regular file, and load_meta reads "
            "only regular files: write the artifact to a file and load that",
        )
    if size is None and found.st_size > max_bytes:
        held = f"{found.st_size:,} bytes, more than the {max_bytes:,}"
    elif size is not None:  # read past the cap: it grew, or its size was not reported
        held = f"more than the {max_bytes:,} bytes"
    else:
        return
    cap = f"max_bytes={max_bytes}" if given else "MAX_FILE_BYTES"
    raise MetaError(
        "",
        f"cannot read {path}: it holds {held} load_meta reads ({cap}): if it "
        "is an artifact, pass a larger cap, load_meta(path, max_bytes=...)",
    )


def dump_meta(meta: CodegenMeta, path: str | Path) -> None:
    """Write ``meta`` to ``path`` atomically; the same meta always gives the same bytes.

    A bad meta is a MetaError and writes nothing; a file that cannot be written is an
    ArtifactWriteError (an OSError) naming ``path``, with the old file left as it was.
    Automatic garbage collection is paused for the call (shardplan.collector).
    """
    paused = pause_collector()  # first: see shardplan.collector
    try:
        # Here, not at the top: a process that only reads (shardplan show) never loads it.
        from shardplan.artifact.atomic import atomic_write_bytes

        check_argument(meta, CodegenMeta, "a CodegenMeta", MetaError)
        file = file_path(path)
        atomic_write_bytes(file, meta_to_bytes(meta))
    finally:
        resume_collector(paused)


__all__ = [
    "KNOWN_KEYS",
    "MAX_FILE_BYTES",
    "CodegenMeta",
    "check_meta",
    "dump_meta",
    "file_path",
    "load_meta",
    "meta_from_dict",
    "meta_from_json",
    "meta_to_bytes",
    "meta_to_dict",
    "meta_to_json",
]
