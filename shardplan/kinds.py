"""The meaning of every freeze and rebuild kind of the field table (SPEC §4, §5).

One function per kind, strict and plain. ``shardplan.reference`` dispatches to them
by the kind names in the table; generated code calls them by name, one block per
field. ``path`` names the value's place for error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch.distributed.tensor import Placement

from shardplan.errors import FreezeError, MetaError, json_type
from shardplan.placements import freeze_placement_table, parse_placement_table
from shardplan.targets import (
    TARGET_KEY,
    Target,
    check_json_value,
    target_from_frozen,
    target_of_callable,
)

# ---------------------------------------------------------------- freeze: spec -> meta


def freeze_placement_map(value: Any, path: str) -> dict[str, dict[str, str]]:
    """``{param: {axis: placement}}`` -> ``{param: {axis: "S(0)"}}``."""
    return freeze_placement_table(value, path)


def freeze_named_placements(value: Any, path: str) -> dict[str, dict[str, str]]:
    """``{name: {axis: placement}}`` -> ``{name: {axis: "S(0)"}}``: an in/out contract."""
    return freeze_placement_table(value, path)


def _freeze_strings(value: Any, path: str) -> list[str]:
    # A str is iterable; list("abc") would silently become ["a", "b", "c"].
    if not isinstance(value, (list, tuple)):
        raise FreezeError(path, f"expected a list of str, got {type(value).__name__} {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise FreezeError(
                f"{path}[{index}]", f"expected a str, got {type(item).__name__} {item!r}"
            )
    return list(value)


def freeze_name_list(value: Any, path: str) -> list[str]:
    """A list or tuple of names -> a list."""
    return _freeze_strings(value, path)


def freeze_attr_list(value: Any, path: str) -> list[str]:
    """A list or tuple of attribute names -> a list (``[]`` is meaningful)."""
    return _freeze_strings(value, path)


def _check_scalar(value: Any, path: str) -> Any:
    if isinstance(value, (bool, int, float, str)):
        check_json_value(value, path)
        return value
    raise FreezeError(
        path, f"expected a bool, int, float or str, got {type(value).__name__} {value!r}"
    )


def freeze_scalar(value: Any, path: str) -> Any:
    """A JSON scalar, written as it is."""
    return _check_scalar(value, path)


def freeze_plain(value: Any, path: str) -> Any:
    """A JSON scalar, written as it is."""
    return _check_scalar(value, path)


def freeze_value_to_dict(value: Any, path: str) -> Any:
    """Target -> its dict, callable -> its Target's dict, registry name -> itself,
    in/out contract -> placement texts. Anything else cannot be rebuilt: FreezeError."""
    if isinstance(value, Target):
        for name, arg in value.kwargs.items():
            check_json_value(arg, f"{path}.{name}")
        return value.to_dict()
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if TARGET_KEY in value:
            raise FreezeError(path, f"a contract may not name an input or output {TARGET_KEY!r}")
        return freeze_placement_table(value, path)
    if isinstance(value, Placement):
        raise FreezeError(
            path,
            f"a bare placement {value!r} cannot be rebuilt; write a contract {{name: {{axis: placement}}}}",
        )
    if callable(value):
        return target_of_callable(value, path).to_dict()
    raise FreezeError(
        path,
        f"expected a Target, a module-level callable, a registry name or an in/out contract, "
        f"got {type(value).__name__} {value!r}",
    )


def freeze_dict_copy(value: Any, path: str) -> dict[str, Any]:
    """A mapping with str keys and JSON values -> a dict."""
    if not isinstance(value, Mapping):
        raise FreezeError(path, f"expected a mapping, got {type(value).__name__} {value!r}")
    copy = dict(value)
    check_json_value(copy, path)
    return copy


def freeze_int_truthy(value: Any, path: str) -> int:
    """A non-zero int, written as it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FreezeError(path, f"expected an int, got {type(value).__name__} {value!r}")
    return value


# --------------------------------------------------------------- rebuild: meta -> spec


def rebuild_placement_map(value: Any, path: str) -> dict[str, dict[str, Placement]] | None:
    """Absent -> None; ``{}`` stays ``{}``; else parsed placements."""
    return None if value is None else parse_placement_table(value, path)


def rebuild_named_placements(value: Any, path: str) -> dict[str, dict[str, Placement]] | None:
    """Absent -> None; ``{}`` stays ``{}``; else parsed placements."""
    return None if value is None else parse_placement_table(value, path)


def _rebuild_strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        raise MetaError(path, f"expected an array of strings, got {json_type(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise MetaError(f"{path}[{index}]", f"expected a string, got {json_type(item)}")
    return list(value)


def rebuild_name_list(value: Any, path: str) -> list[str] | None:
    """Absent -> None; else a list of strings."""
    return None if value is None else _rebuild_strings(value, path)


def rebuild_attr_list(value: Any, path: str) -> list[str] | None:
    """Absent -> None; else a list of strings (``[]`` stays ``[]``)."""
    return None if value is None else _rebuild_strings(value, path)


def rebuild_bool_default_true(value: Any, path: str) -> bool:
    """Absent -> True; else a boolean."""
    if value is None:
        return True
    if not isinstance(value, bool):
        raise MetaError(path, f"expected a boolean, got {json_type(value)}")
    return value


def rebuild_opt_scalar(value: Any, path: str) -> Any:
    """Absent -> None; else a JSON scalar (string, number or boolean)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise MetaError(path, f"expected a string, number or boolean, got {json_type(value)}")


def rebuild_injection_target(value: Any, path: str) -> Any:
    """Absent -> None; ``{"_target_": ...}`` -> Target; a registry name stays a string;
    any other object is an in/out contract."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        if TARGET_KEY in value:
            return target_from_frozen(value, path)
        return parse_placement_table(value, path)
    raise MetaError(
        path,
        f'expected {{"{TARGET_KEY}": ...}}, a registry name or an in/out contract, got {json_type(value)}',
    )


def rebuild_dict_copy(value: Any, path: str) -> dict[str, Any]:
    """Absent -> ``{}``; else a copy of the object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MetaError(path, f"expected an object, got {json_type(value)}")
    return dict(value)


def rebuild_int_truthy(value: Any, path: str) -> int:
    """Absent -> 0; else an integer."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetaError(path, f"expected an integer, got {json_type(value)}")
    return value


def rebuild_tuple_empty(value: Any, path: str) -> tuple[str, ...]:
    """Absent -> ``()``; else a tuple of strings."""
    return () if value is None else tuple(_rebuild_strings(value, path))


# ---------------------------------------------------------------------- the registry

FreezeFn = Callable[[Any, str], Any]
RebuildFn = Callable[[Any, str], Any]


def _write_when_not_none(value: Any) -> bool:
    return value is not None


def _write_when_truthy(value: Any) -> bool:
    return bool(value)


# kind -> (write condition, converter). Conditions are SPEC §4's "written when" column.
FREEZE_KINDS: dict[str, tuple[Callable[[Any], bool], FreezeFn]] = {
    "placement_map": (_write_when_not_none, freeze_placement_map),
    "named_placements": (_write_when_not_none, freeze_named_placements),
    "name_list": (_write_when_truthy, freeze_name_list),
    "attr_list": (_write_when_not_none, freeze_attr_list),
    "scalar": (_write_when_not_none, freeze_scalar),
    "value_to_dict": (_write_when_not_none, freeze_value_to_dict),
    "plain": (_write_when_not_none, freeze_plain),
    "dict_copy": (_write_when_truthy, freeze_dict_copy),
    "int_truthy": (_write_when_truthy, freeze_int_truthy),
}

REBUILD_KINDS: dict[str, RebuildFn] = {
    "placement_map": rebuild_placement_map,
    "named_placements": rebuild_named_placements,
    "name_list": rebuild_name_list,
    "attr_list": rebuild_attr_list,
    "bool_default_true": rebuild_bool_default_true,
    "opt_scalar": rebuild_opt_scalar,
    "injection_target": rebuild_injection_target,
    "dict_copy": rebuild_dict_copy,
    "int_truthy": rebuild_int_truthy,
    "tuple_empty": rebuild_tuple_empty,
}
