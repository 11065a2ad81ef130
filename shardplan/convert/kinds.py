"""The kinds' functions (docs/contract.md §4, §5): each record of
``shardplan.table.kinds.KINDS`` names its ``freeze_<record>`` (live -> JSON) and
``rebuild_<record>`` (JSON -> live) here, and its shortcuts. Generated code calls them
by name, one block per field; ``shardplan.reference`` by the names a row's crossing
gives. ``path`` names the value's place for error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn

from torch.distributed.tensor import (
    Placement,
    Replicate as Replicate,  # read_plan's gather tests it
)

from shardplan.convert import placements, trust
from shardplan.convert.json_values import (
    MAX_DOCUMENT_DEPTH,
    copied_json,
    frozen_strings,
    json_copy,
    members_within,
)
from shardplan.convert.placements import (
    freeze_named_placement,
    freeze_placement_table,
    parse_named_placement,
    parse_placement_table,
)
from shardplan.convert.targets import (
    Target,
    check_json_value,
    frozen_target,
    target_from_frozen,
    target_of_callable,
)
from shardplan.convert.trust import READ_BACK as READ_BACK  # what freeze's admit passes
from shardplan.errors import (
    FreezeError,
    MetaError,
    described,
    field_path,
    json_type,
    key_path,
    shown,
)
from shardplan.table.format import TARGET_KEY

if TYPE_CHECKING:
    from shardplan.table.spec import PlacementMap, Scalar

# ------------------------------------------------------------ freeze: live -> JSON
#
# One function per record (shardplan.table.kinds.KINDS): ``freeze_<record>(value, path)``.


def freeze_placements(value: Any, path: str) -> dict[str, dict[str, str]]:
    """``{name: {axis: placement}}`` -> ``{name: {axis: "S(0)"}}``: a parameter map or an
    in/out contract."""
    return freeze_placement_table(value, path)


def freeze_names(value: Any, path: str) -> list[str]:
    """A list or tuple of names -> a list."""
    return common_frozen_strings(value) or frozen_strings(value, path)


def freeze_scalar(value: Any, path: str) -> Scalar:
    """A JSON scalar, written as it is (a str or a bool, the common cases, need no check)."""
    if type(value) is str or type(value) is bool:
        return value
    if isinstance(value, (bool, int, float, str)):
        check_json_value(value, path)
        return value
    raise FreezeError(path, f"expected a bool, int, float or str, got {described(value)}")


def _freeze_injected_mapping(value: Mapping[Any, Any], path: str) -> dict[str, Any]:
    """A named placement ``{axis: placement}`` (one level) or a contract
    ``{name: {axis: placement}}`` (two levels), told apart by the values, as rebuild does."""
    if TARGET_KEY in value:
        raise FreezeError(path, f"a contract may not name an input or output {TARGET_KEY!r}")
    nested = [isinstance(item, Mapping) for item in value.values()]
    if all(nested):
        return freeze_placement_table(value, path)
    if not any(nested):
        return freeze_named_placement(value, path)
    key = next(k for k, is_nested in zip(value, nested, strict=True) if is_nested != nested[0])
    raise FreezeError(
        key_path(path, key.value if isinstance(key, Enum) else key),
        "mixes placements and {axis: placement} mappings: use a named placement "
        "{axis: placement} or a contract {name: {axis: placement}}, not both",
    )


def freeze_injected(value: Any, path: str) -> str | dict[str, Any]:
    """Target -> its dict, callable -> its Target's dict, registry name -> itself, named
    placement or in/out contract -> placement texts. Anything else cannot be rebuilt:
    FreezeError."""
    if isinstance(value, Target):
        return frozen_target(value, path)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _freeze_injected_mapping(value, path)
    if isinstance(value, Placement):
        raise FreezeError(
            path,
            f"a bare placement {shown(value)} cannot be rebuilt; write a named placement "
            "{axis: placement}",
        )
    if callable(value):
        return target_of_callable(value, path).to_dict()
    raise FreezeError(
        path,
        "expected a Target, a module-level callable, a registry name, a named placement or "
        f"an in/out contract, got {described(value)}",
    )


def freeze_json_object(value: Any, path: str) -> dict[str, Any]:
    """A mapping with str keys and JSON values -> a copy sharing no container with it."""
    if not isinstance(value, Mapping):
        raise FreezeError(path, f"expected a mapping, got {described(value)}")
    copy = dict(value)
    check_json_value(copy, path)
    return json_copy(copy)  # type: ignore[no-any-return]


def freeze_int(value: Any, path: str) -> int:
    """A truthy int, or the bool ``True`` (a producer's marker such as
    ``skip_source_lowering: true``), written as it is; freeze never calls it for a
    falsy value."""
    if value is True:
        return True
    if isinstance(value, bool) or not isinstance(value, int):
        raise FreezeError(path, f"expected an int or True, got {described(value)}")
    check_json_value(value, path)
    return value


def freeze_handler_map(value: Any, path: str) -> dict[str, str]:
    """A mapping of module FQN -> handler name (both str) -> a dict."""
    if not isinstance(value, Mapping):
        raise FreezeError(path, f"expected a dict of FQN -> handler, got {described(value)}")
    for name, handler in value.items():
        if not isinstance(name, str):
            raise FreezeError(
                key_path(path, name), f"a module name must be a str, got {described(name)}"
            )
        if not isinstance(handler, str):
            raise FreezeError(key_path(path, name), f"expected a str, got {described(handler)}")
    return dict(value)


def freeze_pairs(value: Any, path: str) -> list[list[str]]:
    """A list or tuple of pairs of FQNs -> a list of 2-lists."""
    if not isinstance(value, (list, tuple)):
        raise FreezeError(path, f"expected a list of pairs, got {described(value)}")
    pairs = []
    for index, pair in enumerate(value):
        frozen = frozen_strings(pair, f"{path}[{index}]", "two FQNs")
        if len(frozen) != 2:
            raise FreezeError(f"{path}[{index}]", f"expected a pair of two FQNs, got {len(frozen)}")
        pairs.append(frozen)
    return pairs


def freeze_bool(value: Any, path: str) -> bool:
    """A bool, written as it is (1 or "yes" is refused: rebuild reads only booleans)."""
    if type(value) is not bool:
        raise FreezeError(path, f"expected a bool, got {described(value)}")
    return value


def freeze_typed_int(value: Any, path: str) -> int:
    """An int, written as it is (a bool is no int here: JSON tells them apart)."""
    if type(value) is bool or not isinstance(value, int):
        raise FreezeError(path, f"expected an int, got {described(value)}")
    check_json_value(value, path)
    return value


def freeze_typed_float(value: Any, path: str) -> float:
    """A float, or an int (PEP 484 lets it stand for one), finite, written as it is."""
    if type(value) is bool or not isinstance(value, (int, float)):
        raise FreezeError(path, f"expected a float, got {described(value)}")
    check_json_value(value, path)
    return value


def freeze_typed_str(value: Any, path: str) -> str:
    """A str, written as it is."""
    if not isinstance(value, str):
        raise FreezeError(path, f"expected a str, got {described(value)}")
    return value


def freeze_sharded_params(param_plan: dict[str, dict[str, Any]]) -> list[str]:
    """Derived from the frozen entries: sorted FQNs of the parameters with any axis not
    replicated. write_plan's entries hold live tables (placements where texts would be).
    Strict rebuild computes it too (to refuse a stale one): plain loops, no generator
    expression, since it runs over every parameter of every read."""
    sharded: list[str] = []
    append = sharded.append
    for fqn, entry in param_plan.items():
        params = entry.get("params")
        if not params:
            continue
        prefix = f"{fqn}." if fqn else ""
        for param, named in params.items():
            for text in named.values():
                if text != "R" if type(text) is str else type(text) is not Replicate:
                    append(prefix + param)
                    break
    sharded.sort()
    return sharded


def refuse_none(path: str, *, absent: Any) -> NoReturn:
    """Refuse a None its freeze kind does not write, where the row's rebuild kind reads the
    absent key as ``absent`` instead: the plan would not come back as it was."""
    raise FreezeError(
        path,
        f"None is not written, and rebuild reads the missing key as {absent!r}; "
        f"set {absent!r} or another value",
    )


def refuse_falsy(value: Any, path: str) -> NoReturn:
    """Strict rebuild: a falsy value under a key freeze writes only when truthy
    (``out_names: []``, ``ep_size: 0``) would be dropped when frozen again."""
    raise MetaError(
        path,
        f"{json_type(value)} {shown(value)} is never written (freeze writes this key only "
        "when truthy), so it would not come back: leave the key out (strict=False reads it "
        "as absent)",
    )


def refuse_default(value: Any, path: str) -> NoReturn:
    """Strict rebuild: the default under a key freeze writes only when not the default
    would be dropped when frozen again (it reads back from the absent key)."""
    raise MetaError(
        path,
        f"{json_type(value)} {shown(value)} is the default, which is never written (freeze "
        "writes this key only when not the default): leave the key out (strict=False reads "
        "it as absent)",
    )


def refuse_null(path: str, *, absent: Any) -> NoReturn:
    """Strict rebuild: a null where freeze always writes a value (a plan-level key that is
    not ``mesh_dim_names``) would read back as ``absent`` and be written so."""
    raise MetaError(
        path,
        f"null is never written here; it would come back as {absent!r}: write the value, "
        "or leave the key out (strict=False reads null as absent)",
    )


def admit(rebuild: Callable[..., Any], frozen: Any, path: str, *targets: trust.Admission) -> Any:
    """``frozen``, once the row's rebuild kind has read it back; else FreezeError at ``path``.

    A freeze kind may write values its row's rebuild kind refuses (``scalar`` writes 1,
    ``bool_default_true`` reads only booleans). Freeze refuses them here, so everything it
    writes can be rebuilt (docs/contract.md §4). A Target read back here was built by the
    planner, in Python: trusted code, so a rebuild that takes Targets (a record's
    ``targets``) is passed ``trust.READ_BACK`` as ``targets`` (freezing is unchanged by trust).
    """
    try:
        rebuild(frozen, path, *targets)
    except MetaError as exc:
        raise FreezeError(
            exc.path,
            f"{described(frozen)} would be written, but rebuild refuses it " f"({exc.message})",
        ) from None
    return frozen


# ------------------------------------------------------------ rebuild: JSON -> live
#
# One function per record (shardplan.table.kinds.KINDS): ``rebuild_<record>(value, path)``,
# called only for a present value (an absent one is the row's absent value, inlined by
# generated code); a derived key's record checks instead: ``check_<record>``.


def rebuild_placements(value: Any, path: str) -> dict[str, dict[str, Placement]]:
    """``{name: {axis: "S(0)"}}`` -> parsed placements; ``{}`` stays ``{}``."""
    return parse_placement_table(value, path)


def _rebuild_strings(value: Any, path: str) -> list[str]:
    common = common_strings(value)
    if common is not None:
        return common
    if not isinstance(value, list):
        raise MetaError(path, f"expected an array of strings, got {json_type(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise MetaError(f"{path}[{index}]", f"expected a string, got {json_type(item)}")
    return list(value)


def rebuild_names(value: Any, path: str) -> list[str]:
    """An array of strings -> a list (``[]`` stays ``[]``)."""
    return _rebuild_strings(value, path)


def rebuild_name_tuple(value: Any, path: str) -> tuple[str, ...]:
    """An array of strings -> a tuple."""
    return tuple(_rebuild_strings(value, path))


def rebuild_bool(value: Any, path: str) -> bool:
    """A boolean."""
    if not isinstance(value, bool):
        raise MetaError(path, f"expected a boolean, got {json_type(value)}")
    return value


def rebuild_int_or_true(value: Any, path: str) -> int:
    """An integer or a boolean, as it is: what ``freeze_int`` writes is a truthy int or
    ``true`` (``1.5`` or ``"s"`` would not freeze again; a falsy one is refused by strict
    rebuild, which knows the key is written only when truthy)."""
    if isinstance(value, int):  # bool included
        return value
    raise MetaError(path, f"expected a non-zero integer or true, got {json_type(value)}")


def rebuild_scalar(value: Any, path: str) -> Scalar:
    """A JSON scalar (string, number or boolean), as it is."""
    if isinstance(value, (bool, int, float, str)):
        return value
    raise MetaError(path, f"expected a string, number or boolean, got {json_type(value)}")


def _rebuild_injected_object(
    value: dict[Any, Any], path: str
) -> dict[str, Placement] | dict[str, dict[str, Placement]]:
    # The shape is told by the values: all strings, a named placement {axis: "S(0)"};
    # all objects, a contract {name: {axis: "S(0)"}}. Anything else names the first
    # value that does not fit.
    first: type | None = None
    for key, item in value.items():
        kind = str if isinstance(item, str) else dict if isinstance(item, dict) else None
        if kind is None:
            raise MetaError(
                key_path(path, key),
                "expected a placement text (a named placement {axis: placement}) or an "
                f"object (a contract {{name: {{axis: placement}}}}), got {json_type(item)}",
            )
        if first is None:
            first = kind
        elif kind is not first:
            raise MetaError(
                key_path(path, key),
                f"expected {'a placement text' if first is str else 'an object'} like the "
                "values before it: a named placement {axis: placement} or a contract "
                "{name: {axis: placement}}, not both",
            )
    if first is str:
        return parse_named_placement(value, path)
    return parse_placement_table(value, path)


def rebuild_injected(
    value: Any, path: str, targets: trust.Admission
) -> Target | str | dict[str, Placement] | dict[str, dict[str, Placement]]:
    """``{"_target_": ...}`` -> Target, admitted by ``targets`` (what the rebuild's caller
    allowed: trust.admission); a registry name stays a string; an object of placement
    texts is a named placement, an object of objects a contract."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if TARGET_KEY in value:
            return target_from_frozen(value, path, targets)
        return _rebuild_injected_object(value, path)
    raise MetaError(
        path,
        f'expected {{"{TARGET_KEY}": ...}}, a registry name, a named placement or an in/out '
        f"contract, got {json_type(value)}",
    )


def rebuild_json_object(value: Any, path: str) -> dict[str, Any]:
    """An object -> a copy sharing no container with it, nested no deeper than freeze
    writes (json_values.MAX_DEPTH)."""
    if not isinstance(value, dict):
        raise MetaError(path, f"expected an object, got {json_type(value)}")
    return copied_json(value, path)  # type: ignore[no-any-return]


def rebuild_int(value: Any, path: str) -> int:
    """An integer (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetaError(path, f"expected an integer, got {json_type(value)}")
    return value


def rebuild_typed_int(value: Any, path: str) -> int:
    """An integer (``true`` is no integer)."""
    if type(value) is bool or not isinstance(value, int):
        raise MetaError(path, f"expected an integer, got {json_type(value)}")
    return value


def rebuild_typed_float(value: Any, path: str) -> float:
    """A number, as it is: an integer stays the int freeze wrote (so it is written back as
    it was), which a float field admits."""
    if type(value) is bool or not isinstance(value, (int, float)):
        raise MetaError(path, f"expected a number, got {json_type(value)}")
    return value


def rebuild_typed_str(value: Any, path: str) -> str:
    """A string."""
    if not isinstance(value, str):
        raise MetaError(path, f"expected a string, got {json_type(value)}")
    return value


def rebuild_handler_map(value: Any, path: str) -> dict[str, str]:
    """An object of handler names -> a dict."""
    if not isinstance(value, dict):
        raise MetaError(path, f"expected an object, got {json_type(value)}")
    for name, handler in value.items():
        if not isinstance(name, str):
            raise MetaError(key_path(path, name), f"object key {shown(name)} must be a string")
        if not isinstance(handler, str):
            raise MetaError(key_path(path, name), f"expected a string, got {json_type(handler)}")
    return dict(value)


def rebuild_pairs(value: Any, path: str) -> list[tuple[str, str]]:
    """An array of 2-arrays of strings -> a list of pairs."""
    if not isinstance(value, list):
        raise MetaError(path, f"expected an array of pairs, got {json_type(value)}")
    pairs = []
    for index, pair in enumerate(value):
        first, second = _rebuild_pair(pair, f"{path}[{index}]")
        pairs.append((first, second))
    return pairs


def _rebuild_pair(pair: Any, path: str) -> list[str]:
    strings = _rebuild_strings(pair, path)
    if len(strings) != 2:
        raise MetaError(path, f"expected a pair of two FQNs, got {len(strings)} items")
    return strings


def check_sharded_params(value: Any, path: str, param_plan: dict[str, Any]) -> None:
    """Derived: strict rebuild refuses a value other than what the entries give (a stale
    list would tell a reader of the file other parameters than the plan shards)."""
    listed = _rebuild_strings(value, path)
    expected = freeze_sharded_params(param_plan)
    if listed != expected:
        missing = sorted(set(expected) - set(listed))
        raise MetaError(
            path,
            f"stale: the entries shard {len(expected)} parameters"
            + (f" (first missing: {missing[0]!r})" if missing else "")
            + "; write it again with freeze_plan, or rebuild with strict=False to recompute it",
        )


# ------------------------------------------------------- shortcuts for the common case
#
# Generated code calls a kind's function, and builds the error path it takes, only where
# the value is not of the common form. A shortcut gives exactly what its kind's function
# gives (tests/table/test_kinds_declared.py checks), or a falsy value (None, or an empty result
# the function gives as well) where the function must decide.


# The placement tables' shortcuts live with their fast paths; generated code imports them from here.
common_frozen_table = placements.common_frozen_table
common_parsed_table = placements.common_parsed_table
consume_placements = placements.consume_placement_table
# A text's parsed placement, None for a text not parsed yet: generated rebuild's inline loop.
cached_placement = placements._PARSED.get
# read_plan's inline loop: a text cached_placement has not seen, parsed; NotConsumed for none.
consume_placement = placements.consume_placement_text
NotConsumed = placements.NotConsumed
# The writer's shortcut (write_plan): the live table, checked for the whole plan at once,
# its placements written through written_text.
writable_table = placements.writable_table
live_tables_writable = placements.live_tables_writable
written_text = placements.written_text


def common_frozen_strings(value: Any) -> list[str] | None:
    """A list or tuple of exactly str -> a new list; None for anything else."""
    kind = type(value)
    if (kind is list or kind is tuple) and all(type(item) is str for item in value):
        return list(value)
    return None


def common_strings(value: Any) -> list[str] | None:
    """A JSON array of strings -> a copy; None for anything else."""
    if type(value) is list and all(type(item) is str for item in value):
        return value[:]
    return None


def common_string_tuple(value: Any) -> tuple[str, ...] | None:
    """A JSON array of strings -> a tuple; None for anything else."""
    if type(value) is list and all(type(item) is str for item in value):
        return tuple(value)
    return None


def read_renamed(
    obj: dict[str, Any], key: str, aliases: tuple[str, ...], path: str, missing: Any = None
) -> tuple[Any, str]:
    """The value of ``key`` in ``obj``, or of the alias (a key the field was frozen under
    before, in the same object) an older artifact holds instead, with the path of the key
    read; ``missing`` when neither is there."""
    present = [name for name in (key, *aliases) if name in obj]
    if len(present) > 1:
        raise MetaError(
            field_path(path, present[1]),
            f"{present[1]!r} is an older name of {key!r}, which is given too: keep one",
        )
    name = present[0] if present else key
    return obj.get(name, missing), field_path(path, name)


# ------------------------------------------------------- read_plan's one pass
#
# The records' consume functions (shardplan.table.kinds.Consume): each takes a value of a
# document read_plan decoded and alone holds, as the rebuild function would read it, and
# raises NotConsumed for anything else (the read then takes the pair's path).


def consume_strings(value: Any) -> list[str]:
    """A JSON array of strings, adopted as it is; NotConsumed for anything else."""
    if type(value) is not list:
        raise NotConsumed
    for item in value:  # a loop, not all(): these lists hold one or two names
        if type(item) is not str:
            raise NotConsumed
    return value


def consume_string_tuple(value: Any) -> tuple[str, ...]:
    """A JSON array of strings -> a tuple; NotConsumed for anything else."""
    return tuple(consume_strings(value))


# An entry's or a rule's value sits below the document, param_plan or injections, and the
# entry or rule: the levels the writer's bound leaves it.
VALUE_LEVELS = MAX_DOCUMENT_DEPTH - 3


def counted(value: Any) -> int:
    """The members of the objects in an entry's or a rule's value, which the one pass
    takes through the rebuild function; NotConsumed for null (the pass reads it before
    only where freeze writes it) and for a value nested deeper than the writer writes
    (MAX_DOCUMENT_DEPTH, counted from the document's top)."""
    if value is None:
        raise NotConsumed
    if type(value) is dict:  # the common one, a Target: scalars under its keys
        for item in value.values():
            if type(item) is dict or type(item) is list:
                break
        else:
            return len(value)
    members = members_within(value, VALUE_LEVELS)
    if members is None:
        raise NotConsumed
    return members


def gather_sharded(fqn: str, table: PlacementMap, gathered: list[str]) -> None:
    """Derived in the rebuild's one walk: append to ``gathered`` the FQN of each parameter
    of a module's rebuilt params table with any axis not replicated (sorted and compared
    with frozen_sharded_params at the end, as check_sharded_params would derive it)."""
    prefix = f"{fqn}." if fqn else ""
    for param, named in table.items():
        for placement in named.values():
            if type(placement) is not Replicate:
                gathered.append(prefix + param)
                break


def compare_sharded_params(value: Any, path: str, gathered: list[str], param_plan: Any) -> None:
    """Strict rebuild: refuse a frozen_sharded_params other than ``gathered`` (the walk's),
    with check_sharded_params' message."""
    gathered.sort()
    if type(value) is not list or value != gathered:
        check_sharded_params(value, path, param_plan)
