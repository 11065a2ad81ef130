"""The kind functions generated code calls: ``shardplan.kinds`` with fast paths.

Placement tables are the hot part of both directions. Their fast paths handle the
common shapes (plain dicts, str keys, Shard/Replicate/Partial, known placement texts)
with exact type tests and a parse cache; anything else goes to the strict function
of ``shardplan.kinds``, which accepts or refuses it exactly as the reference does and
names the place in its error. So speed never changes behaviour, only the common case.
"""

from __future__ import annotations

from typing import Any

from torch.distributed.tensor import Partial, Placement, Replicate, Shard

from shardplan import kinds
from shardplan.kinds import (  # re-exported: no fast path needed
    admit,
    freeze_attr_list,
    freeze_dict_copy,
    freeze_int_truthy,
    freeze_name_list,
    freeze_value_to_dict,
    read_renamed,
    rebuild_attr_list,
    rebuild_bool_default_true,
    rebuild_dict_copy,
    rebuild_injection_target,
    rebuild_int_truthy,
    rebuild_name_list,
    rebuild_opt_scalar,
    rebuild_tuple_empty,
    refuse_none,
)
from shardplan.placement_text import MAX_INT_DIGITS, REDUCE_OPS
from shardplan.placements import parse_placement

__all__ = [
    "admit",
    "read_renamed",
    "refuse_none",
    "freeze_attr_list",
    "freeze_dict_copy",
    "freeze_int_truthy",
    "freeze_name_list",
    "freeze_named_placements",
    "freeze_placement_map",
    "freeze_plain",
    "freeze_scalar",
    "freeze_value_to_dict",
    "rebuild_attr_list",
    "rebuild_bool_default_true",
    "rebuild_dict_copy",
    "rebuild_injection_target",
    "rebuild_int_truthy",
    "rebuild_name_list",
    "rebuild_named_placements",
    "rebuild_opt_scalar",
    "rebuild_placement_map",
    "rebuild_tuple_empty",
]

_BOUND = 10**MAX_INT_DIGITS


def freeze_scalar(value: Any, path: str) -> Any:
    """As ``kinds.freeze_scalar``; a bool (the common case) needs no further check."""
    return value if type(value) is bool else kinds.freeze_scalar(value, path)


def freeze_plain(value: Any, path: str) -> Any:
    """As ``kinds.freeze_plain``; a str (the common case) needs no further check."""
    return value if type(value) is str else kinds.freeze_plain(value, path)


_PARTIAL_TEXT = {op: f"P({op})" for op in REDUCE_OPS}
_REPLICATE_TEXT = "R"


# id(placement) -> (placement, text). Torch placements are immutable (their fields are
# read-only properties) and planners reuse a few placement objects across thousands of
# modules, so the text of one is computed once. Holding the object keeps its id from
# being reused while cached; the size bound keeps a plan of fresh objects from growing it.
_TEXT_BY_ID: dict[int, tuple[Placement, str]] = {}
_TEXT_LIMIT = 4096


def _placement_text(placement: Any) -> str | None:
    """The text of a Shard, Replicate or Partial; None for anything else."""
    kind = type(placement)
    if kind is Replicate:
        return "R"
    if kind is Shard:
        dim = placement.dim
        return f"S({dim})" if -_BOUND < dim < _BOUND else None
    if kind is Partial:
        return _PARTIAL_TEXT.get(placement.reduce_op)
    return None  # strided shard, unknown types: the strict path


def _fast_freeze_table(
    table: Any, text_by_id: dict[int, tuple[Placement, str]] = _TEXT_BY_ID
) -> dict[str, dict[str, str]] | None:
    """Frozen table, or None when the table is not of the common shape."""
    if type(table) is not dict:
        return None
    frozen: dict[str, dict[str, str]] = {}
    for name, named in table.items():
        if type(name) is not str or type(named) is not dict:
            return None
        texts: dict[str, str] = {}
        for axis, placement in named.items():
            if type(axis) is not str:
                return None  # str Enum axes: the strict path reads their values
            known = text_by_id.get(id(placement))
            if known is not None and known[0] is placement:
                texts[axis] = known[1]
                continue
            text = _placement_text(placement)
            if text is None:
                return None
            if len(text_by_id) < _TEXT_LIMIT:
                text_by_id[id(placement)] = (placement, text)
            texts[axis] = text
        frozen[name] = texts
    return frozen


def freeze_placement_map(value: Any, path: str) -> dict[str, dict[str, str]]:
    """As ``kinds.freeze_placement_map``."""
    frozen = _fast_freeze_table(value)
    return kinds.freeze_placement_map(value, path) if frozen is None else frozen


def freeze_named_placements(value: Any, path: str) -> dict[str, dict[str, str]]:
    """As ``kinds.freeze_named_placements``."""
    frozen = _fast_freeze_table(value)
    return kinds.freeze_named_placements(value, path) if frozen is None else frozen


# Placement text -> the parsed placement. Placements are immutable values, so specs
# may share them. Only texts that parsed are cached, and the cache is bounded so a
# hostile artifact cannot grow it without limit.
_PARSED: dict[str, Placement] = {}
_PARSED_LIMIT = 4096


def _fast_parse_table(obj: Any) -> dict[str, dict[str, Placement]] | None:
    """Parsed table, or None when any part is not a plain dict of cached texts."""
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


def _learn(obj: dict[str, Any]) -> None:
    # After a strict parse succeeded, every text in it is a valid placement: cache them.
    for named in obj.values():
        for text in named.values():
            if text not in _PARSED and len(_PARSED) < _PARSED_LIMIT:
                _PARSED[text] = parse_placement(text)


def _parse_table(obj: Any, path: str, strict: Any) -> dict[str, dict[str, Placement]]:
    parsed = _fast_parse_table(obj)
    if parsed is None:
        parsed = strict(obj, path)
        _learn(obj)
    return parsed


def rebuild_placement_map(value: Any, path: str) -> dict[str, dict[str, Placement]] | None:
    """As ``kinds.rebuild_placement_map``."""
    return None if value is None else _parse_table(value, path, kinds.rebuild_placement_map)


def rebuild_named_placements(value: Any, path: str) -> dict[str, dict[str, Placement]] | None:
    """As ``kinds.rebuild_named_placements``."""
    return None if value is None else _parse_table(value, path, kinds.rebuild_named_placements)
