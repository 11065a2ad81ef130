"""The one row model of every field table: ``SpecField`` rows and ``RetiredKey`` entries.

Pure data and the standard library only: the generator and the staleness guard of every
generated module read the tables, and neither may pay for importing torch.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from functools import cached_property
from typing import Any

from shardplan.table.format import (
    NESTING_SEPARATOR,
    TOP_LEVEL_GROUPS,
    WRITTEN_CONDITIONS,
)


def split_key(group: str, key: str) -> tuple[str, str]:
    """``(object, key)``: the top-level object a key of ``group`` lives in ("" for the
    group's own object) and the key inside it. Only a top-level group's keys nest
    (``parallel_dims.sequence_parallel``); this is the one place a key is split."""
    if group not in TOP_LEVEL_GROUPS:
        return "", key
    within, _, leaf = key.rpartition(NESTING_SEPARATOR)
    return within, leaf


class _Keyed:
    """Where a row's or a retired key's ``key`` lives, parsed once (``split_key``)."""

    key: str
    group: str

    @cached_property
    def within(self) -> str:
        """The top-level object the key lives in ("": the group's own object)."""
        return split_key(self.group, self.key)[0]

    @cached_property
    def leaf(self) -> str:
        """The key inside the object it lives in."""
        return split_key(self.group, self.key)[1]


@dataclass(frozen=True)
class SpecField(_Keyed):
    """One row of a field table.

    ``name`` is the dataclass attribute, ``key`` the key it is frozen under (in the plan
    table a nested key reads ``container.key``), ``group`` where that key lives
    (``shardplan.table.format``), ``freeze``/``rebuild`` name the conversion kinds, and
    ``post_init`` marks a field that is not a constructor argument and is set after the
    object is built. ``doc`` is the one-line description the artifact's schema and field
    reference show; ``aliases`` are keys the field was frozen under before: rebuild still
    reads them, freeze writes ``key``.

    ``written`` (``"not None"``, ``"truthy"`` or ``"always"``) and ``absent`` (the Python
    literal an absent key rebuilds to) say the key's presence where the kind names do not
    (``presence``): left empty, the freeze name's write condition and the rebuild name's
    absent value apply (``bool_default_true``: ``True``), the latter else the dataclass
    field's default.
    """

    name: str
    key: str
    group: str
    freeze: str = ""
    rebuild: str = ""
    post_init: bool = False
    doc: str = ""
    aliases: tuple[str, ...] = ()
    written: str = ""
    absent: str = ""

    @cached_property
    def alias_places(self) -> tuple[tuple[str, str], ...]:
        """``(object, key)`` of each alias; the generator refuses one outside ``within``."""
        return tuple(split_key(self.group, alias) for alias in self.aliases)

    @cached_property
    def alias_leaves(self) -> tuple[str, ...]:
        """Each alias as a key of the object the row's key lives in."""
        return tuple(leaf for _, leaf in self.alias_places)

    def presence(
        self, preset_written: str, preset_absent: str, field: dataclasses.Field[Any] | None
    ) -> Presence | str:
        """The key's presence: the row's own ``written``/``absent`` first, then its kind
        names' presets, then (absent) the default of the dataclass ``field`` (None: the row
        names no field); or, as a str, why it cannot be decided. The generator and the
        reference both resolve here."""
        field_default = default_literal(field) if field is not None else "None"
        if field is not None and field_default is None and _states_default(field):
            if not (self.absent or preset_absent):
                return (
                    "the field's default has no Python literal, so no absent key can rebuild "
                    "it.\n  Give the field a literal default (a field(default_factory=dict, "
                    "list or tuple) counts)"
                )
        written = self.written or preset_written
        if written not in WRITTEN_CONDITIONS:
            return f"written={written!r} must be one of " + ", ".join(map(repr, WRITTEN_CONDITIONS))
        absent = self.absent or preset_absent or field_default
        if absent is None:
            return (
                "the field has no default a literal states, so what an absent key rebuilds "
                'to is unknown.\n  Set absent="..." on the row (a Python literal), or give '
                "the field a default"
            )
        try:
            value = ast.literal_eval(absent)
        except (ValueError, SyntaxError):
            return f"absent={absent!r} is not a Python literal"
        if repr(value) != absent:
            return f"absent={absent!r} is not written as Python writes it: use {repr(value)!r}"
        return Presence(written, absent)


@dataclass(frozen=True)
class Presence:
    """A row's resolved presence: when its key is written, what its absence rebuilds to."""

    written: str  # one of WRITTEN_CONDITIONS
    absent: str  # the Python literal an absent (or, lenient, null) key gives

    @property
    def writes_null(self) -> bool:
        """Freeze writes null for None: the key is written always and None is its absence,
        or written when not the default and None is not the default."""
        if self.written == "always":
            return self.absent == "None"
        return self.written == "not default" and self.absent != "None"

    @property
    def null_is_none(self) -> bool:
        """A null reads back as None and an absent key as the default, which is not None
        (written when not the default): rebuild tells the two apart."""
        return self.written == "not default" and self.absent != "None"

    @property
    def refuses_none(self) -> bool:
        """Freeze refuses None: it is not written, and the absent key rebuilds to something
        else (``is_boundary: None`` would come back ``True``)."""
        return self.written == "not None" and self.absent != "None"

    def writes(self, value: Any) -> bool:
        """Whether freeze writes ``value``."""
        if self.written == "always":
            return True
        if self.written == "not default":
            return not self.is_absent_value(value)
        return bool(value) if self.written == "truthy" else value is not None

    def is_absent_value(self, value: Any) -> bool:
        """Whether ``value`` is the absent value exactly: equal to it, and of its type
        (``True`` is no default ``1``)."""
        absent = self.absent_value()
        return type(value) is type(absent) and value == absent

    def absent_value(self) -> Any:
        """The absent value itself: a fresh object each call."""
        return ast.literal_eval(self.absent)

    def broken_law(self, field: dataclasses.Field[Any] | None) -> str:
        """How this presence breaks the defaults laws (docs/contract.md §6) for the dataclass
        ``field`` (None: the row names none), said as what comes back instead; "" when both
        hold. (a) An absent key rebuilds the field's default. (b) A value freeze leaves
        unwritten rebuilds as itself: None where written when not None (where None is no
        default, freeze refuses it instead), the default where written when not the default,
        and a falsy value, as the one falsy default, where written when truthy."""
        stated = field is not None and _states_default(field)
        default = default_literal(field) if field is not None and stated else None
        if stated and default is None:
            return "the default has no Python literal, so no absent key can rebuild it"
        if default is not None and self.absent != default:
            return f"an artifact without the key rebuilds {self.absent} instead"
        if self.written == "truthy" and self.absent_value():
            return (
                "a falsy value is never written (written when truthy), so 0, False or an "
                f"empty value would rebuild as {self.absent} instead"
            )
        return ""


_FACTORY_LITERALS: dict[Any, str] = {dict: "{}", list: "[]", tuple: "()"}


def _states_default(field: dataclasses.Field[Any]) -> bool:
    """Whether the dataclass field has a default (a value or a factory)."""
    return not (
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )


def default_literal(field: dataclasses.Field[Any]) -> str | None:
    """A dataclass field's default as a Python literal; None where it has none a literal
    states exactly (no default, or an object with no literal form)."""
    if field.default is not dataclasses.MISSING:
        text = repr(field.default)
        try:
            back = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
        return text if type(back) is type(field.default) and back == field.default else None
    return _FACTORY_LITERALS.get(field.default_factory)


@dataclass(frozen=True)
class RetiredKey(_Keyed):
    """A key of a removed row: rebuild accepts it (strict mode too) and drops it.

    Retiring, not deleting, keeps artifacts written before the removal loading.
    """

    key: str
    group: str  # where the key used to be written
    reason: str


def rows_digest(rows: Sequence[SpecField], retired: Sequence[RetiredKey]) -> str:
    """sha256 over the rows and the retired keys, in order."""
    gone = [astuple(r) for r in retired]
    listed = [astuple(f) for f in rows]
    text = json.dumps({"rows": listed, "retired": gone} if gone else listed)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rows_of_group(rows: Sequence[SpecField], group: str) -> tuple[SpecField, ...]:
    """The rows of ``group``, in table order."""
    return tuple(f for f in rows if f.group == group)


def accepted_keys(
    rows: Sequence[SpecField], retired: Sequence[RetiredKey], group: str
) -> tuple[str, ...]:
    """The keys strict rebuild accepts in ``group``: current keys, aliases, retired keys."""
    own = rows_of_group(rows, group)
    aliases = tuple(alias for f in own for alias in f.aliases)
    return (*(f.key for f in own), *aliases, *(r.key for r in retired if r.group == group))
