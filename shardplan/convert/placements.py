"""Placement text <-> torch DTensor placement objects (docs/contract.md §7).

``S(d)`` is ``Shard(d)``, ``R`` is ``Replicate()``, ``P(op)`` is ``Partial(op)`` and
``SS(d,f)`` is torch's strided shard ``_StridedShard(d, split_factor=f)``. Parsing is
strict and nothing ever degrades to ``Replicate()``: unknown text or an unknown
placement type is an error naming the place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from itertools import chain, repeat
from typing import Any

from torch.distributed.tensor import Partial, Placement, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from shardplan.convert.placement_text import (
    INT,
    MAX_INT_DIGITS,
    REDUCE_OPS,
    SHARD,
    STRIDED_SHARD,
)
from shardplan.errors import FreezeError, MetaError, described, json_type, key_path, shown

_SHARD_RE = re.compile(SHARD)
_STRIDED_RE = re.compile(STRIDED_SHARD)
# Wider than the grammar on purpose: they only shape the error message of a near miss.
_LOW_FACTOR_RE = re.compile(rf"SS\({INT},(0|-[0-9]+)\)")
_PARTIAL_RE = re.compile(r"P\(([a-z_]+)\)")
EXPECTED_FORMS = "expected S(dim), SS(dim,factor), R or P(op)"


def _bounded(value: int) -> bool:
    return bool(abs(value) < 10**MAX_INT_DIGITS)


def placement_to_string(placement: object, path: str = "placement") -> str:
    """Render one torch placement as its text form, or raise FreezeError.

    Types are matched exactly: a subclass (torch's mask partial, say) has a meaning
    the text form cannot carry, so it is refused rather than written as its base.
    """
    kind = type(placement)
    if kind is Shard:
        dim = placement.dim  # type: ignore[attr-defined]
        if _bounded(dim):
            return f"S({dim})"
    elif kind is Replicate:
        return "R"
    elif kind is Partial:
        op = placement.reduce_op  # type: ignore[attr-defined]
        if op in REDUCE_OPS:
            return f"P({op})"
        raise FreezeError(
            path, f"Partial reduce op {op!r} has no text form; use one of {', '.join(REDUCE_OPS)}"
        )
    elif kind is _StridedShard:
        dim, factor = placement.dim, placement.split_factor  # type: ignore[attr-defined]
        if factor >= 1 and _bounded(dim) and _bounded(factor):
            return f"SS({dim},{factor})"
        raise FreezeError(path, f"strided shard split_factor must be >= 1, got {factor}")
    else:
        raise FreezeError(
            path,
            f"cannot freeze {shown(placement)} ({kind.__qualname__}): expected Shard, Replicate, "
            "Partial or torch's strided shard",
        )
    raise FreezeError(path, f"shard dim {dim} is out of range (at most {MAX_INT_DIGITS} digits)")


def parse_placement(text: object, path: str = "placement") -> Placement:
    """Parse one placement text, or raise MetaError naming ``path``."""
    if not isinstance(text, str):
        raise MetaError(
            path,
            f"cannot parse placement {shown(text)}: expected a string, got {json_type(text)}; {EXPECTED_FORMS}",
        )
    if text == "R":
        return Replicate()
    match = _SHARD_RE.fullmatch(text)
    if match:
        return Shard(int(match[1]))
    match = _STRIDED_RE.fullmatch(text)
    if match:
        return _StridedShard(int(match[1]), split_factor=int(match[2]))
    match = _PARTIAL_RE.fullmatch(text)
    if match and match[1] in REDUCE_OPS:
        return Partial(match[1])
    if match:
        raise MetaError(
            path,
            f"cannot parse placement {text!r}: unknown reduce op {match[1]!r} "
            f"(known: {', '.join(REDUCE_OPS)}); {EXPECTED_FORMS}",
        )
    if _LOW_FACTOR_RE.fullmatch(text):
        raise MetaError(
            path,
            f"cannot parse placement {text!r}: the split factor must be >= 1; {EXPECTED_FORMS}",
        )
    raise MetaError(path, f"cannot parse placement {text!r}: {EXPECTED_FORMS}")


def axis_name(axis: object, path: str) -> str:
    """The frozen key of a mesh axis: the string itself, or a str Enum's value."""
    if isinstance(axis, Enum):
        if isinstance(axis.value, str):
            return axis.value
    elif isinstance(axis, str):
        return axis
    raise FreezeError(path, f"mesh axis key {shown(axis)} must be a str or a str Enum")


def freeze_named_placement(named: object, path: str) -> dict[str, str]:
    """``{axis: placement}`` -> ``{axis name: placement text}``."""
    if not isinstance(named, Mapping):
        raise FreezeError(
            path, f"expected a mapping of mesh axis -> placement, got {described(named)}"
        )
    frozen: dict[str, str] = {}
    for axis, placement in named.items():
        name = axis_name(axis, path)
        if name in frozen:
            raise FreezeError(path, f"mesh axis {name!r} appears twice (as a str and as an Enum)")
        frozen[name] = placement_to_string(placement, key_path(path, name))
    return frozen


# ------------------------------------------------------- the two tables, with fast paths
#
# Placement tables are the hot part of both directions. Each table function first tries
# the common shape (plain dicts, str keys and axes, Shard/Replicate/Partial, placement
# texts seen before) with exact type tests and a cache; anything else takes the strict
# walk, which accepts or refuses it and names the place. Speed never changes behaviour.

# id(placement) -> text. Torch placements are immutable (their fields are read-only
# properties) and planners reuse a few placement objects across thousands of modules,
# so the text of one is computed once. _KEPT holds every cached placement alive, so its
# id cannot be taken by another object while cached; the bound keeps a plan of fresh
# objects from growing the cache.
_TEXT_BY_ID: dict[int, str] = {}
_KEPT: list[Placement] = []
_CACHE_LIMIT = 4096
_PARTIAL_TEXT = {op: f"P({op})" for op in REDUCE_OPS}


def _common_text(placement: object) -> str | None:
    """The text of a Shard, Replicate or Partial of the common form; None for the rest."""
    kind = type(placement)
    if kind is Replicate:
        return "R"
    if kind is Shard:
        dim = placement.dim  # type: ignore[attr-defined]
        return f"S({dim})" if _bounded(dim) else None
    if kind is Partial:
        return _PARTIAL_TEXT.get(placement.reduce_op)  # type: ignore[attr-defined]
    return None  # strided shard, unknown types: the strict walk


def common_frozen_table(table: object) -> dict[str, dict[str, str]] | None:
    """The frozen table, or None when it is not of the common shape."""
    if type(table) is not dict:
        return None
    text_by_id = _TEXT_BY_ID
    frozen: dict[str, dict[str, str]] = {}
    for name, named in table.items():
        if type(name) is not str or type(named) is not dict:
            return None
        texts: dict[str, str] = {}
        for axis, placement in named.items():
            if type(axis) is not str:
                return None  # str Enum axes: the strict walk reads their values
            text = text_by_id.get(id(placement))
            if text is None:
                text = _common_text(placement)
                if text is None:
                    return None
                if len(text_by_id) < _CACHE_LIMIT:
                    _KEPT.append(placement)
                    text_by_id[id(placement)] = text
            texts[axis] = text
        frozen[name] = texts
    return frozen


def writable_table(table: object) -> dict[str, Any] | None:
    """The live table itself, for the writer (write_plan) to write as it stands: any exact
    dict. What it holds is checked for the whole plan at once (``live_tables_writable``)
    and its placements written through ``written_text``. None otherwise: freeze then
    builds the texts, and refuses what it must.
    """
    return table if type(table) is dict else None


# The placement types the writer writes as they stand; the rest (torch's strided shard,
# unknown types) take freeze's own path.
_WRITTEN_TYPES = frozenset({Shard, Replicate, Partial})


def live_tables_writable(param_plan: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> bool:
    """Whether the live tables under ``keys`` of every entry are of the common shape: a dict
    of names to dicts of placements of exact Shard, Replicate or Partial type (a text, a
    list or a None where a placement belongs would be written by the encoder as it
    stands, where freeze refuses it). One pass in C over every placement of the plan:
    no Python frame a table. What the encoder checks itself is left to it: keys that are
    not exact str (it refuses them), dict subclasses and placements it has no text for
    (``written_text`` refuses them).
    """
    entries = param_plan.values()
    tables: list[Any] = []
    for key in keys:
        tables.extend(filter(None, map(dict.get, entries, repeat(key))))
    try:  # dict.values refuses what is not a dict: a table or a name's value
        named = chain.from_iterable(map(dict.values, tables))
        found = set(map(type, chain.from_iterable(map(dict.values, named))))
    except TypeError:
        return False
    return found <= _WRITTEN_TYPES


def written_text(placement: object) -> str:
    """The text of a live placement, for the writer's encoder (its ``default``): cached
    by id as freeze caches it. TypeError for anything else, which sends the writer back
    to freeze's own path (its error, or its bytes)."""
    text = _TEXT_BY_ID.get(id(placement))
    if text is None:
        text = _common_text(placement)
        if text is None:
            raise TypeError(f"{type(placement).__name__} has no common placement text")
        if len(_TEXT_BY_ID) < _CACHE_LIMIT:
            _KEPT.append(placement)  # type: ignore[arg-type]
            _TEXT_BY_ID[id(placement)] = text
    return text


def freeze_placement_table(table: object, path: str) -> dict[str, dict[str, str]]:
    """``{name: {axis: placement}}`` -> the same with placement texts: exactly two levels."""
    frozen = common_frozen_table(table)
    return _freeze_table_strictly(table, path) if frozen is None else frozen


def _freeze_table_strictly(table: object, path: str) -> dict[str, dict[str, str]]:
    if not isinstance(table, Mapping):
        raise FreezeError(
            path, f"expected a mapping of name -> {{axis: placement}}, got {described(table)}"
        )
    frozen: dict[str, dict[str, str]] = {}
    for name, named in table.items():
        if not isinstance(name, str):
            raise FreezeError(path, f"name {shown(name)} must be a str")
        frozen[name] = freeze_named_placement(named, key_path(path, name))
    return frozen


def parse_named_placement(obj: object, path: str) -> dict[str, Placement]:
    """``{axis: "S(0)"}`` -> ``{axis: Shard(0)}``, strictly."""
    if not isinstance(obj, dict):
        raise MetaError(path, f"expected an object of mesh axis -> placement, got {json_type(obj)}")
    parsed: dict[str, Placement] = {}
    for axis, text in obj.items():
        _check_key(axis, path)
        parsed[axis] = parse_placement(text, key_path(path, axis))
    return parsed


# Placement text -> the parsed placement. Placements are immutable values, so specs may
# share them. Only texts that parsed are cached, and the cache is bounded so a hostile
# artifact cannot grow it without limit.
_PARSED: dict[str, Placement] = {}


def common_parsed_table(obj: object) -> dict[str, dict[str, Placement]] | None:
    """The parsed table, or None when any part is not a plain dict of cached texts."""
    if type(obj) is not dict:
        return None
    parsed_cache = _PARSED
    parsed: dict[str, dict[str, Placement]] = {}
    for name, named in obj.items():
        if type(named) is not dict or type(name) is not str:
            return None
        placements: dict[str, Placement] = {}
        for axis, text in named.items():
            placement = parsed_cache.get(text) if type(text) is str else None
            if placement is None or type(axis) is not str:
                return None
            placements[axis] = placement
        parsed[name] = placements
    return parsed


class NotConsumed(Exception):
    """A value read_plan's one pass does not take: the read starts again on the pair's
    path (load_meta, then rebuild), which accepts the file or names its defect."""


def consume_placement_text(text: object) -> Placement:
    """The placement of a text not cached yet, cached when it is the canonical text;
    NotConsumed for a value that is no placement text (the pair's path names it)."""
    if type(text) is not str:
        raise NotConsumed
    try:
        placement = parse_placement(text)
    except MetaError:
        raise NotConsumed from None
    if placement_to_string(placement) == text and len(_PARSED) < _CACHE_LIMIT:
        _PARSED[text] = placement
    return placement


def consume_placement_table(obj: object) -> int:
    """Parse a placement table of a document read_plan alone holds, in place: its dicts
    become the live table's, each text replaced by its placement. Gives the members of its
    objects (counted against the file's ':' bytes); NotConsumed for anything else. Its
    keys come from JSON, so they are str: no key is tested, and what is not an object of
    objects fails on its own (no ``items``, unhashable, no ``len``)."""
    if type(obj) is not dict:
        raise NotConsumed
    cached = _PARSED.get
    members = len(obj)
    try:
        for named in obj.values():
            members += len(named)
            for axis, text in named.items():
                placement = cached(text)
                named[axis] = consume_placement_text(text) if placement is None else placement
    except (TypeError, AttributeError):
        raise NotConsumed from None
    return members


def parse_placement_table(obj: object, path: str) -> dict[str, dict[str, Placement]]:
    """``{name: {axis: text}}`` -> ``{name: {axis: placement}}``; ``{}`` stays ``{}``."""
    parsed = common_parsed_table(obj)
    if parsed is None:
        parsed = _parse_table_strictly(obj, path)
        # It parsed, so every text in it is a valid placement: cache them.
        for named in parsed.values():
            for placement in named.values():
                text = placement_to_string(placement)
                if text not in _PARSED and len(_PARSED) < _CACHE_LIMIT:
                    _PARSED[text] = placement
    return parsed


def _parse_table_strictly(obj: object, path: str) -> dict[str, dict[str, Placement]]:
    if not isinstance(obj, dict):
        raise MetaError(
            path, f"expected an object of name -> {{axis: placement}}, got {json_type(obj)}"
        )
    parsed: dict[str, dict[str, Placement]] = {}
    for name, named in obj.items():
        _check_key(name, path)
        parsed[name] = parse_named_placement(named, key_path(path, name))
    return parsed


def _check_key(key: object, path: str) -> None:
    # JSON keys are always strings; a CodegenMeta built in Python may hold others.
    if not isinstance(key, str):
        raise MetaError(path, f"object key {shown(key)} must be a string")
