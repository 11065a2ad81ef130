"""Safe evolution of the field table: compare it with the lock of the table as last
generated (``generated/table.lock.json``) and classify every edit before anything is
written, the way ``buf breaking`` classifies a protobuf change.

- compatible: a row added, an alias added, a key retired, a field's attribute renamed.
  Every artifact written before still loads and means the same.
- changes the bytes freeze writes: rows reordered, a freeze kind changed, a key renamed
  with an alias or retired. Old artifacts load, but freezing again writes other bytes.
- breaking: a key removed without retiring it, renamed without an alias, a rebuild kind
  changed, a row moved to another group, an alias or a retired key dropped. Artifacts
  written before may no longer load, or may mean something else: refused (exit 2) unless
  ``--allow-breaking``, which records the break in the lock.

Pure functions of plain data; the pipeline reads the old lock and the emit step writes
the new one with the rest of generated/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from generator.table import Table, Tables

LOCK_NAME = "table.lock.json"
COMPATIBLE, BYTES, BREAKING = "compatible", "changes the bytes freeze writes", "breaking"


@dataclass
class Changes:
    """The classified edits between the lock and the table, each one line."""

    compatible: list[str] = field(default_factory=list)
    bytes: list[str] = field(default_factory=list)
    breaking: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compatible or self.bytes or self.breaking)

    def report(self) -> str:
        """Every change under its class, for the command line."""
        lines = []
        for title, items in (
            (BREAKING, self.breaking),
            (BYTES, self.bytes),
            (COMPATIBLE, self.compatible),
        ):
            lines += [f"  {title}: {item}" for item in items]
        return "\n".join(lines)


def lock_rows(table: Table) -> list[dict[str, Any]]:
    """The part of the table artifacts depend on: every row with a key, in order."""
    return [
        {
            "name": row.name,
            "key": row.key,
            "group": row.group,
            "freeze": row.freeze,
            "rebuild": row.rebuild,
            "aliases": list(row.aliases),
        }
        for row in table.keyed
    ]


def _table_lock(table: Table) -> dict[str, Any]:
    return {
        "rows": lock_rows(table),
        "retired": [
            {"key": gone.key, "group": gone.group, "reason": gone.reason} for gone in table.retired
        ],
    }


def lock_of(tables: Tables, breaks: list[dict[str, Any]]) -> dict[str, Any]:
    """The lock to write: each table's rows and retired keys, and every break allowed so far."""
    return {"tables": {table.name: _table_lock(table) for table in tables}, "breaks": breaks}


def locked_tables(lock: dict[str, Any], first: str) -> dict[str, Any]:
    """Each table's part of a lock. A lock from before the tables were named holds one
    table's rows at its top level: the first table's."""
    if isinstance(lock.get("tables"), dict):
        return {name: part for name, part in lock["tables"].items() if isinstance(part, dict)}
    return {first: lock}


def parse_lock(text: str) -> dict[str, Any] | None:
    """A lock read from disk, or None when it is not one (then there is nothing to compare)."""
    try:
        lock = json.loads(text)
    except ValueError:
        return None
    if not isinstance(lock, dict):
        return None
    if not isinstance(lock.get("tables"), dict) and not isinstance(lock.get("rows"), list):
        return None
    return lock


def classify(lock: dict[str, Any], tables: Tables) -> Changes:
    """Classify every edit from ``lock`` (the tables as last generated) to ``tables``."""
    changes = Changes()
    locked = locked_tables(lock, tables.tables[0].name)
    for table in tables:
        # A table the lock does not know yet: every row of it is new.
        part = Changes()
        _classify_table(locked.get(table.name, {"rows": []}), table, part)
        label = f"{table.name} table: "
        changes.compatible += [label + item for item in part.compatible]
        changes.bytes += [label + item for item in part.bytes]
        changes.breaking += [label + item for item in part.breaking]
    return changes


def _classify_table(lock: dict[str, Any], table: Table, changes: Changes) -> None:
    old_rows = {row["key"]: row for row in lock.get("rows", []) if isinstance(row, dict)}
    old_retired = {gone["key"] for gone in lock.get("retired", []) if isinstance(gone, dict)}
    new_rows = {row["key"]: row for row in lock_rows(table)}
    aliases = {alias: row for row in new_rows.values() for alias in row["aliases"]}
    retired = {gone.key for gone in table.retired}

    for key, old in old_rows.items():
        new = new_rows.get(key)
        if new is not None:
            _compare_row(key, old, new, changes)
        elif key in aliases:
            changes.bytes.append(
                f"key {key!r} renamed to {aliases[key]['key']!r}; rebuild still reads {key!r} "
                "(an alias), freeze now writes the new key"
            )
        elif key in retired:
            changes.bytes.append(f"key {key!r} retired: rebuild accepts and drops it")
        else:
            renamed = next((r for r in new_rows.values() if r["name"] == old["name"]), None)
            if renamed is not None:
                changes.breaking.append(
                    f"key {key!r} renamed to {renamed['key']!r} without an alias: artifacts "
                    f"holding {key!r} no longer load"
                )
            else:
                changes.breaking.append(
                    f"key {key!r} ({old['name']}) removed without retiring it: artifacts "
                    "holding it no longer load"
                )
    for key, new in new_rows.items():
        if key not in old_rows and not set(new["aliases"]) & set(old_rows):
            changes.compatible.append(f"row added: {new['name']} (key {key!r}, {new['group']})")
    for key in sorted(old_retired - retired):
        if key not in new_rows and key not in aliases:
            changes.breaking.append(
                f"retired key {key!r} dropped: artifacts holding it no longer load"
            )
    _compare_order(old_rows, new_rows, changes)


def _compare_row(key: str, old: dict[str, Any], new: dict[str, Any], changes: Changes) -> None:
    if old["group"] != new["group"]:
        changes.breaking.append(
            f"key {key!r} moved from {old['group']} to {new['group']}: old artifacts hold it "
            "in the other place"
        )
    if old["rebuild"] != new["rebuild"]:
        changes.breaking.append(
            f"key {key!r}: rebuild kind {old['rebuild']} -> {new['rebuild']}: old artifacts may "
            "no longer load, or mean something else"
        )
    if old["freeze"] != new["freeze"]:
        changes.bytes.append(f"key {key!r}: freeze kind {old['freeze']} -> {new['freeze']}")
    if old["name"] != new["name"]:
        changes.compatible.append(f"key {key!r}: spec attribute {old['name']} -> {new['name']}")
    dropped = [alias for alias in old.get("aliases", []) if alias not in new["aliases"]]
    for alias in dropped:
        changes.breaking.append(
            f"alias {alias!r} of key {key!r} dropped: artifacts holding {alias!r} no longer load"
        )
    for alias in new["aliases"]:
        if alias not in old.get("aliases", []):
            changes.compatible.append(f"alias {alias!r} added to key {key!r}")


def _compare_order(
    old_rows: dict[str, dict[str, Any]], new_rows: dict[str, dict[str, Any]], changes: Changes
) -> None:
    # Row order is the key order of every frozen entry and rule: a reorder of the keys both
    # tables have changes the bytes freeze writes, nothing else.
    for group in sorted({row["group"] for row in new_rows.values()}):
        before = [k for k, row in old_rows.items() if row["group"] == group and k in new_rows]
        after = [k for k, row in new_rows.items() if row["group"] == group and k in old_rows]
        if before != after:
            changes.bytes.append(f"{group} rows reordered: {', '.join(after)}")


def ways_forward(changes: Changes) -> str:
    """The message for a refused breaking edit: each change, then what to do."""
    return (
        "the table edit breaks artifacts written before it:\n"
        + "\n".join(f"  - {item}" for item in changes.breaking)
        + '\n  Ways forward: keep reading an old key with aliases=("old_key",) on its row; '
        "retire a removed key with RetiredKey(key, group, reason) in RETIRED_KEYS; or, if the "
        "break is deliberate, run `specgen generate --allow-breaking` to record it in "
        f"generated/{LOCK_NAME}."
    )


def record_breaks(lock: dict[str, Any], changes: Changes, table: Tables) -> list[dict[str, Any]]:
    """The lock's recorded breaks, plus these (each with the table digest that allowed it)."""
    breaks = [item for item in lock.get("breaks", []) if isinstance(item, dict)]
    return breaks + [{"change": item, "table_sha256": table.digest} for item in changes.breaking]
