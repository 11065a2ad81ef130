"""``shardplan diff OLD NEW``: what changed in the plan between two artifacts, by meaning.

Two files mean the same plan when their entries, rules and plan-level keys hold the same
values, whatever their key order, indentation or spacing, the order of their rules, or
the keys no row owns (other producers' metadata, which rides along unchanged): those are
reported as notes, never as changes. A change names the module, the field (and the
parameter or output) and the old and new values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress
from operator import ne
from typing import Any

from shardplan.review.fold import fold, natural_key
from shardplan.review.pair import changed_modules
from shardplan.review.view import PLAN, PlanView, Texts, compact, summary

ABSENT: Any = object()  # a key one side does not hold

# What a change is, as ``--json`` names it.
MODULE_ADDED = "module added"
MODULE_REMOVED = "module removed"
RULE_ADDED = "rule added"
RULE_REMOVED = "rule removed"
RULE_CHANGED = "rule changed"
PLACEMENT_ADDED = "placement added"
PLACEMENT_REMOVED = "placement removed"
PLACEMENT_CHANGED = "placement changed"
FIELD_ADDED = "field added"
FIELD_REMOVED = "field removed"
FIELD_CHANGED = "field changed"
PLAN_CHANGED = "plan field changed"
# A long list held by a plan-level key: its items added or removed, not the whole list.
ITEM_ADDED = "plan item added"
ITEM_REMOVED = "plan item removed"
LONG_LIST = 8


@dataclass(frozen=True)
class Change:
    """One change: ``what`` (one of the names above), ``module`` ("" for a plan-level
    key), ``field`` (``params``, ``rule.inner_wrapper``, ``mesh_dim_names``), ``name`` (the
    parameter or output, or ""), and the ``old`` and ``new`` values (``ABSENT``: not
    there), with their ``old_text`` and ``new_text`` as ``show`` writes them."""

    what: str
    module: str
    field: str
    name: str
    old: Any
    new: Any
    old_text: str
    new_text: str

    def detail(self) -> str:
        """The change after the module's name: ``params[w]: placement changed: a -> b``."""
        where = f"{self.field}[{self.name}]" if self.name else self.field
        if self.old is ABSENT and self.new is ABSENT:
            values = ""
        elif self.old is ABSENT:
            values = f": {self.new_text}"
        elif self.new is ABSENT:
            values = f": {self.old_text}"
        else:
            values = f": {self.old_text} -> {self.new_text}"
        return f" {where}: {self.what}{values}" if where else f": {self.what}{values}"

    def as_json(self) -> dict[str, Any]:
        """The change for ``--json``: absent values are left out."""
        found: dict[str, Any] = {"change": self.what, "module": self.module, "field": self.field}
        if self.name:
            found["name"] = self.name
        if self.old is not ABSENT:
            found["old"] = self.old
        if self.new is not ABSENT:
            found["new"] = self.new
        return found


@dataclass
class Comparison:
    """What ``diff`` found: the changes and the notes on what differs without meaning."""

    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def compare(old: PlanView, new: PlanView, *, same_bytes: bool = False) -> Comparison:
    """The changes from ``old`` to ``new``, and notes on what differs without changing the
    plan (``same_bytes``: the files are byte for byte the same)."""
    found = Comparison()
    # One axis order for both sides, so that a placement reads the same way before and after.
    axes = [*(new.mesh or ()), *(a for a in old.mesh or () if a not in (new.mesh or ()))]
    texts = Texts(axes or None)
    for fqn in sorted(old.entries.keys() - new.entries.keys(), key=natural_key):
        found.changes.append(Change(MODULE_REMOVED, fqn, "", "", ABSENT, ABSENT, "", ""))
    for fqn in sorted(new.entries.keys() - old.entries.keys(), key=natural_key):
        found.changes.append(Change(MODULE_ADDED, fqn, "", "", ABSENT, ABSENT, "", ""))
    for fqn in changed_modules(old.entries, new.entries):
        found.changes += _fields(fqn, "", old.entries[fqn], new.entries[fqn], texts)
    fqns = old.rules.keys() | new.rules.keys()
    # The modules whose rules differ, found in C (a plan's rules are mostly the same).
    for fqn in compress(fqns, map(ne, map(old.rules.get, fqns), map(new.rules.get, fqns))):
        before, after = old.rules.get(fqn), new.rules.get(fqn)
        if before is None or after is None:
            what, value = (RULE_ADDED, after) if before is None else (RULE_REMOVED, before)
            text = compact(value)
            pair = (ABSENT, value, "", text) if before is None else (value, ABSENT, text, "")
            found.changes.append(Change(what, fqn, "rule", "", *pair))
        else:
            found.changes += _fields(fqn, "rule.", before, after, texts, RULE_CHANGED)
    found.changes += _plan(old.plan, new.plan)
    found.changes.sort(key=lambda c: (natural_key(c.module), c.field, c.name, c.what))
    found.notes = _notes(old, new, same_bytes, bool(found.changes))
    return found


def _fields(
    fqn: str,
    prefix: str,
    before: dict[str, Any],
    after: dict[str, Any],
    texts: Texts,
    changed: str = FIELD_CHANGED,
) -> list[Change]:
    """The changes between two entries (or two rules) of one module, key by key."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key, ABSENT), after.get(key, ABSENT)
        if old == new:
            continue
        label = prefix + key
        otable = texts.table(old) if old is not ABSENT else None
        ntable = texts.table(new) if new is not ABSENT else None
        if otable is not None and ntable is not None:
            for name in sorted(otable.keys() | ntable.keys()):
                was, now = old.get(name, ABSENT), new.get(name, ABSENT)
                if was == now:
                    continue
                what = (
                    PLACEMENT_ADDED
                    if was is ABSENT
                    else PLACEMENT_REMOVED if now is ABSENT else PLACEMENT_CHANGED
                )
                text = (otable.get(name, ""), ntable.get(name, ""))
                changes.append(Change(what, fqn, label, name, was, now, *text))
            continue
        what = FIELD_ADDED if old is ABSENT else FIELD_REMOVED if new is ABSENT else changed
        otext = "" if old is ABSENT else texts.placement(old) or compact(old)
        ntext = "" if new is ABSENT else texts.placement(new) or compact(new)
        changes.append(Change(what, fqn, label, "", old, new, otext, ntext))
    return changes


def _plan(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """The changes of the plan-level keys; a long list's items added and removed."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key, ABSENT), after.get(key, ABSENT)
        if old == new:
            continue
        lists = isinstance(old, list) and isinstance(new, list)
        if lists and max(len(old), len(new)) > LONG_LIST:
            olds, news = _counted(old), _counted(new)
            for text in sorted(olds.keys() - news.keys(), key=natural_key):
                changes.append(Change(ITEM_REMOVED, "", key, "", olds[text], ABSENT, text, ""))
            for text in sorted(news.keys() - olds.keys(), key=natural_key):
                changes.append(Change(ITEM_ADDED, "", key, "", ABSENT, news[text], "", text))
            if olds.keys() == news.keys():  # the same items in another order
                changes.append(Change(PLAN_CHANGED, "", key, "", old, new, "(order)", "(order)"))
            continue
        otext = "" if old is ABSENT else summary(old)
        ntext = "" if new is ABSENT else summary(new)
        changes.append(Change(PLAN_CHANGED, "", key, "", old, new, otext, ntext))
    return changes


def _counted(items: list[Any]) -> dict[str, Any]:
    # Items by their text; a repeated item is one (a plan's lists name things once).
    return {compact(item): item for item in items}


def _notes(old: PlanView, new: PlanView, same_bytes: bool, changed: bool) -> list[str]:
    """What differs between the files without changing the plan; where nothing else does
    and the plan is the same, that the bytes differ in layout only."""
    if same_bytes:
        return ["the files are identical"]
    notes = []
    other = sorted(
        key
        for key in old.other.keys() | new.other.keys()
        if old.other.get(key, ABSENT) != new.other.get(key, ABSENT)
    )
    if other:
        notes.append(f"keys no row owns differ (not part of the plan): {', '.join(other)}")
    if old.rule_order != new.rule_order and set(old.rule_order) == set(new.rule_order):
        notes.append("the injection rules are in another order")
    if not notes and not changed:
        notes.append("the bytes differ only in layout (key order, indentation or spacing)")
    return notes


def change_lines(comparison: Comparison, *, collapse: bool = False) -> list[str]:
    """One line per change (``plan`` heads a plan-level one); with ``collapse``, the same
    change in modules that differ only by a number is one line."""
    items = [(c.module or PLAN, c.detail()) for c in comparison.changes]
    if collapse:
        folded = fold(("", name, detail) for name, detail in items)
        items = sorted(((n, t) for _, n, t in folded), key=lambda i: (natural_key(i[0]), i[1]))
    return [name + detail for name, detail in items]
