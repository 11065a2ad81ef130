"""The artifact: CodegenMeta and codegen_meta.json I/O (SPEC §8).

The JSON form is stable: UTF-8, ``indent=2``, ``sort_keys=True``, one trailing
newline, written atomically. Top-level keys this module does not know are kept in
``extra`` and written back unchanged.

Writing and reading try the fast path first (jsoncodec: orjson and msgspec, in C), which
gives exactly the standard library's bytes and documents or steps aside; the standard
library path below then runs as before, with the same errors.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shardplan.artifact import jsoncodec
from shardplan.artifact.atomic import atomic_write_bytes
from shardplan.collector import pause_collector, resume_collector
from shardplan.convert.json_values import raise_if_unwritable
from shardplan.errors import MetaError, json_type, key_path, shown


@dataclass
class CodegenMeta:
    """The frozen plan plus plan-level settings, in their JSON shapes."""

    param_plan: dict[str, dict[str, Any]] = field(default_factory=dict)
    injections: list[dict[str, Any]] = field(default_factory=list)
    special_handlers: dict[str, str] = field(default_factory=dict)
    # None: not recorded by the producer (older planners write null): use the full mesh.
    mesh_dim_names: list[str] | None = field(default_factory=list)
    tied_pairs: list[list[str]] = field(default_factory=list)
    frozen_sharded_params: list[str] = field(default_factory=list)
    # Only sequence_parallel and loss_parallel are read; other planners write more.
    parallel_dims: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


KNOWN_KEYS = tuple(f.name for f in fields(CodegenMeta) if f.name != "extra")


def _expect(value: object, kind: type, path: str) -> None:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise MetaError(path, f"expected {_JSON_NAMES[kind]}, got {json_type(value)}")


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def _expect_str_keys(obj: dict[Any, Any], path: str) -> None:
    # JSON keys are strings; a meta built in Python may hold others, which json.dumps
    # would silently turn into strings.
    for key in obj:
        if not isinstance(key, str):
            raise MetaError(key_path(path, key), f"object key {shown(key)} must be a string")


def _expect_strings(value: object, path: str) -> None:
    if type(value) is list and all(type(item) is str for item in value):
        return  # the common case: frozen_sharded_params holds every sharded parameter
    _expect(value, list, path)
    assert isinstance(value, list)  # for mypy: _expect raised otherwise
    for index, item in enumerate(value):
        _expect(item, str, f"{path}[{index}]")


def check_meta(meta: CodegenMeta) -> None:
    """Check the JSON types of the top-level fields; entries and rules are checked by rebuild."""
    _expect(meta.param_plan, dict, "param_plan")
    _expect_str_keys(meta.param_plan, "param_plan")
    _expect(meta.injections, list, "injections")
    _expect(meta.special_handlers, dict, "special_handlers")
    _expect_str_keys(meta.special_handlers, "special_handlers")
    for name, handler in meta.special_handlers.items():
        _expect(handler, str, key_path("special_handlers", name))
    if meta.mesh_dim_names is not None:
        _expect_strings(meta.mesh_dim_names, "mesh_dim_names")
    _expect(meta.tied_pairs, list, "tied_pairs")
    for index, pair in enumerate(meta.tied_pairs):
        _expect_strings(pair, f"tied_pairs[{index}]")
        if len(pair) != 2:
            raise MetaError(
                f"tied_pairs[{index}]", f"expected a pair of two FQNs, got {len(pair)} items"
            )
    _expect_strings(meta.frozen_sharded_params, "frozen_sharded_params")
    _expect(meta.parallel_dims, dict, "parallel_dims")
    _expect_str_keys(meta.parallel_dims, "parallel_dims")
    for flag in ("sequence_parallel", "loss_parallel"):
        if flag in meta.parallel_dims:
            _expect(meta.parallel_dims[flag], bool, f"parallel_dims.{flag}")
    _expect(meta.extra, dict, "extra")
    _expect_str_keys(meta.extra, "extra")
    clashing = sorted(set(meta.extra) & set(KNOWN_KEYS))
    if clashing:
        raise MetaError("extra", f"keys {clashing} are CodegenMeta fields; set the fields instead")


def meta_from_dict(data: object) -> CodegenMeta:
    """Build a CodegenMeta from a decoded JSON document, checking top-level types."""
    if not isinstance(data, dict):
        raise MetaError("", f"a codegen meta must be a JSON object, got {json_type(data)}")
    known = {key: data[key] for key in KNOWN_KEYS if key in data}
    extra = {key: value for key, value in data.items() if key not in KNOWN_KEYS}
    meta = CodegenMeta(**known, extra=extra)
    check_meta(meta)
    return meta


def meta_to_dict(meta: CodegenMeta) -> dict[str, Any]:
    """The JSON document of ``meta``: the extra keys plus every known field."""
    check_meta(meta)
    return {**meta.extra, **{key: getattr(meta, key) for key in KNOWN_KEYS}}


# Deepest nesting the writer accepts: what the standard library's decoder reads back
# well within the interpreter's recursion limit. Frozen values nest far less (json_values).
MAX_DOCUMENT_DEPTH = 500


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
    data = jsoncodec.decode(text)  # None unless text is canonical: then read strictly
    if data is None:
        data = _parse_strictly(text, source)
    return meta_from_dict(data)


def load_meta(path: str | Path) -> CodegenMeta:
    """Read a codegen_meta.json file. Automatic garbage collection is paused for the call
    (shardplan.collector): the document is one container per JSON object."""
    was_enabled = pause_collector()
    try:
        return _load_meta(Path(path))
    finally:
        resume_collector(was_enabled)


def _load_meta(path: Path) -> CodegenMeta:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MetaError("", f"cannot read {path}: {exc.strerror}") from None
    data = jsoncodec.decode(raw)  # None unless the file is canonical: then read strictly
    if data is None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetaError("", f"{path} is not UTF-8: {exc}") from None
        data = _parse_strictly(text, str(path))
    return meta_from_dict(data)


def dump_meta(meta: CodegenMeta, path: str | Path) -> None:
    """Write ``meta`` to ``path`` atomically; the same meta always gives the same bytes.

    A bad meta is a MetaError and writes nothing; a file that cannot be written is an
    ArtifactWriteError (an OSError) naming ``path``, with the old file left as it was.
    Automatic garbage collection is paused for the call (shardplan.collector).
    """
    was_enabled = pause_collector()
    try:
        atomic_write_bytes(Path(path), meta_to_bytes(meta))
    finally:
        resume_collector(was_enabled)
