"""What no table row can say, shared by the reference and generated code.

Nothing here names a field or a key of either table: per-field work is the tables'
(reference) or the generated code's. This module handles what surrounds it: indexing
injection rules by ``match`` and refusing orphans and duplicates, checking entries and the
plan's modules, and carrying the keys no row owns (other producers' metadata) across,
given the owned keys by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from shardplan.convert.json_values import (
    MAX_DEPTH,
    MAX_DOCUMENT_DEPTH,
    TooDeep,
    json_copy,
    members_within,
    raise_if_unwritable,
)
from shardplan.convert.placements import NotConsumed
from shardplan.errors import (
    FreezeError,
    MetaError,
    described,
    field_path,
    json_type,
    key_path,
    shown,
)
from shardplan.table.format import GROUP_INJECTIONS, GROUP_PARAM_PLAN, MATCH_KEY
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan

if TYPE_CHECKING:
    from generated.meta import CodegenMeta


def module_path(fqn: str) -> str:
    """Where a module's spec lives in a plan, for freeze errors."""
    return key_path("modules", fqn)


def entry_path(fqn: str) -> str:
    """Where a module's entry lives in a meta, for rebuild errors."""
    return key_path("param_plan", fqn)


def rule_path(index: int) -> str:
    """Where an injection rule lives in a meta, for rebuild errors."""
    return f"injections[{index}]"


def check_modules(plan: object) -> None:
    """Refuse (FreezeError) a plan whose modules rebuild could not give back: a module name
    that is not a str, a spec that is not a ModuleShardingSpec. Both freeze functions run
    it first, so neither fails later with an AttributeError."""
    if not isinstance(plan, ShardingPlan):
        raise FreezeError("", f"expected a ShardingPlan, got {described(plan)}")
    if not isinstance(plan.modules, dict):
        raise FreezeError(
            "modules", f"expected a dict of FQN -> spec, got {described(plan.modules)}"
        )
    for fqn, spec in plan.modules.items():
        if not isinstance(fqn, str):
            raise FreezeError(
                key_path("modules", fqn), f"a module name must be a str, got {described(fqn)}"
            )
        if not isinstance(spec, ModuleShardingSpec):
            raise FreezeError(
                module_path(fqn), f"expected a ModuleShardingSpec, got {described(spec)}"
            )


def frozen_other_keys(
    value: object,
    path: str,
    owned: Collection[str],
    nested: Mapping[str, Collection[str]],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A copy of the keys no row owns, for freeze to write back unchanged: the plan's own
    field ``path`` holds them as the file nests them. Returns the top-level ones and, for
    each object in ``nested``, a dict of its own unowned keys (empty when not there), which
    freeze adds the nested rows' keys to. A key a row owns is refused (it would be written
    twice), and so is any value JSON would not give back."""
    if not isinstance(value, Mapping):
        raise FreezeError(path, f"expected a dict of the keys no row owns, got {described(value)}")
    raise_if_unwritable(dict(value), path, FreezeError, allow_tuples=False)
    copy: dict[str, Any] = json_copy(dict(value))
    for key in copy:
        if key in (GROUP_PARAM_PLAN, GROUP_INJECTIONS):  # the document's own, from the modules
            raise FreezeError(
                key_path(path, key),
                f"{key!r} is the key the modules' specs are written under; it cannot ride "
                f"along in {path}",
            )
        if key in owned and key not in nested:
            raise FreezeError(
                key_path(path, key),
                f"{key!r} is a key a row of the plan table owns; set that field, not {path}",
            )
    objects: dict[str, dict[str, Any]] = {}
    for container, keys in nested.items():
        inner = copy.pop(container, {})
        where = key_path(path, container)
        if not isinstance(inner, dict):
            raise FreezeError(where, f"expected an object of other keys, got {described(inner)}")
        for key in inner:
            if key in keys:
                raise FreezeError(
                    key_path(where, key),
                    f"{key!r} is a key a row of the plan table owns; set that field, not {path}",
                )
        objects[container] = inner
    return copy, objects


def other_keys_of(
    extra: dict[str, Any],
    containers: Mapping[str, dict[str, Any]],
    owned: Collection[str],
    nested: Mapping[str, Collection[str]],
) -> dict[str, Any]:
    """A copy of the document's keys no row owns, as they nest in the file: the top-level
    keys of ``extra`` (a retired key, owned, is dropped), and for each object nested keys
    live in (``containers``) its own unowned keys, when it has any."""
    other = {key: _copied(value, key, 1) for key, value in extra.items() if key not in owned}
    for container, keys in nested.items():
        inner = containers.get(container)
        if isinstance(inner, dict):
            kept = {
                key: _copied(value, key_path(container, key), 2)
                for key, value in inner.items()
                if key not in keys
            }
            if kept:
                other[container] = kept
    return other


def _copied(value: Any, path: str, depth: int) -> Any:
    # The bound freeze puts on other_keys (its containers count from other_keys itself:
    # a top-level key's value is one level in, a nested object's key's value two).
    try:
        return json_copy(value, MAX_DEPTH - depth)
    except TooDeep:
        raise MetaError(
            path,
            f"the value nests deeper than freeze writes ({MAX_DEPTH} levels, counted from the document's top)",
        ) from None


def members_beside(document: dict[str, Any], walked: tuple[str, ...]) -> int:
    """The members of the document and of every object in its top-level values but those
    under ``walked`` (which read_plan's one pass counts as it walks them); NotConsumed if a
    value nests deeper than the writer writes (MAX_DOCUMENT_DEPTH, the document level 1)."""
    members = len(document)
    for key, value in document.items():
        if key not in walked:
            found = members_within(value, MAX_DOCUMENT_DEPTH - 1)
            if found is None:
                raise NotConsumed
            members += found
    return members


def rules_in_order(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rules`` ordered by their ``match`` FQN (in place): the canonical order, the one a
    rebuilt plan's modules come back in (the file's sorted keys), so the first write is
    already what every later write gives."""
    rules.sort(key=_match_of)
    return rules


def _match_of(rule: dict[str, Any]) -> str:
    return rule[MATCH_KEY]  # type: ignore[no-any-return]


def check_keys(obj: dict[str, Any], known: Collection[str], path: str) -> None:
    """Refuse a key of ``obj`` that is not in ``known`` (strict rebuild only)."""
    for key in obj:
        if key not in known:
            raise MetaError(
                field_path(path, key), f"unknown key {shown(key)}; known keys: {', '.join(known)}"
            )


def check_entry(
    entry: object, fqn: str, known: Collection[str], strict: bool, nulls: Collection[str] = ()
) -> dict[str, Any]:
    """Check one param_plan entry is an object (and, if strict, has only known keys and no
    null but under ``nulls``, the keys freeze writes null under: refuse_nulls).

    Every strict rebuild calls this once an entry: the entry's path is built only on the way
    to an error, never on the path that accepts it."""
    if not isinstance(entry, dict):
        raise MetaError(entry_path(fqn), f"expected an object, got {json_type(entry)}")
    if strict:
        # The accepting path: two set operations, in C. A null or an unknown key takes the
        # loop below, which names it (or accepts a null under ``nulls``).
        try:
            clean = _key_set(known).issuperset(entry) and None not in entry.values()
        except (
            Exception
        ):  # noqa: BLE001 - a value whose == refuses None (an array, built in Python)
            clean = False
        if not clean:
            for key, value in entry.items():
                if value is None and key not in nulls or key not in known:
                    check_keys(entry, known, entry_path(fqn))  # raises, naming the first unknown
                    refuse_nulls(entry, entry_path, fqn, nulls)  # or the first null
    return entry


# The known keys as a set, for each collection the rebuilds pass (a table's constant tuple).
_KEY_SETS: dict[Collection[str], frozenset[str]] = {}


def _key_set(known: Collection[str]) -> frozenset[str]:
    try:
        found = _KEY_SETS.get(known)
    except TypeError:  # not hashable: a list
        return frozenset(known)
    if found is None:
        found = frozenset(known)
        if len(_KEY_SETS) < 64:  # bounded, as every cache an input can grow
            _KEY_SETS[known] = found
    return found


def refuse_nulls(
    obj: dict[str, Any], where: Callable[[Any], str], place: Any, nulls: Collection[str] = ()
) -> None:
    """Strict rebuild accepts only what freeze writes back, and freeze writes a null in an
    entry or a rule only under ``nulls`` (keys written when not a default other than None;
    ``is_boundary: null`` would come back ``true``). Lenient rebuild reads any other null
    as the key absent. ``where(place)`` is the object's path, built only for the error."""
    if None not in obj.values():
        return  # the common case: one scan, no path built
    for key, value in obj.items():
        if value is None and key not in nulls:
            raise MetaError(
                field_path(where(place), key),
                f"{json_type(value)} {shown(value)} is never written here, so it would not "
                "come back: leave the key out (strict=False reads it as absent)",
            )


def index_rules(
    meta: CodegenMeta, known: Collection[str], strict: bool, nulls: Collection[str] = ()
) -> dict[str, tuple[int, dict[str, Any]]]:
    """Map each rule's ``match`` FQN to (index, rule), refusing orphans and duplicates (and,
    if strict, unknown keys, nulls, and a rule with no injection: freeze writes none)."""
    rules: dict[str, tuple[int, dict[str, Any]]] = {}
    entries = meta.param_plan
    keys = frozenset((MATCH_KEY, *known))
    for index, rule in enumerate(meta.injections):
        # The accepting path tests only; _refuse_rule builds the paths and says what is wrong.
        fqn = rule.get(MATCH_KEY) if type(rule) is dict else None
        if type(fqn) is not str or fqn not in entries or fqn in rules:
            fqn = _checked_match(rule, index, entries, rules)
        if strict and (len(rule) == 1 or not keys.issuperset(rule) or None in rule.values()):
            check_keys(rule, (MATCH_KEY, *known), rule_path(index))
            refuse_nulls(rule, rule_path, index, nulls)
            if len(rule) == 1:
                raise MetaError(
                    rule_path(index),
                    "a rule with no injection is never written, so it would not come back: "
                    "remove it (strict=False ignores it)",
                )
        rules[fqn] = (index, rule)
    return rules


def _checked_match(
    rule: Any,
    index: int,
    entries: dict[str, Any],
    rules: dict[str, tuple[int, dict[str, Any]]],
) -> str:
    """The MetaError, naming its place, for a rule index_rules cannot index; or the FQN of
    one it can that the accepting path does not take (a dict or str subclass, built in
    Python)."""
    path = rule_path(index)
    if not isinstance(rule, dict):
        raise MetaError(path, f"expected an object, got {json_type(rule)}")
    if MATCH_KEY not in rule:
        raise MetaError(path, f'a rule needs a "{MATCH_KEY}" key naming a module FQN')
    fqn = rule[MATCH_KEY]
    match_path = field_path(path, MATCH_KEY)
    if not isinstance(fqn, str):
        raise MetaError(match_path, f"expected a string, got {json_type(fqn)}")
    if fqn not in entries:
        raise MetaError(match_path, f"no param_plan entry for {fqn!r}; every rule needs one")
    if fqn in rules:
        first = rules[fqn][0]
        raise MetaError(match_path, f"a second rule for {fqn!r}; the first is {rule_path(first)}")
    return fqn
