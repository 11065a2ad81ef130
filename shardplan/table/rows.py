"""The one row model of every field table: ``SpecField`` rows and ``RetiredKey`` entries.

Pure data and the standard library only: the generator and the staleness guard of every
generated module read the tables, and neither may pay for importing torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from functools import cached_property

from shardplan.table.format import NESTING_SEPARATOR, TOP_LEVEL_GROUPS


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
    literal an absent key rebuilds to) say the key's presence where the kind names do not:
    left empty, the freeze name's write condition and the rebuild name's absent value apply
    (``bool_default_true``: ``True``), the latter else the dataclass field's default
    (``shardplan.table.kinds.resolve`` decides it once).
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
