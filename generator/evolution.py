"""Safe evolution of the field table: compare it with the lock of the table as last
generated (``generated/table.lock.json``) and classify every edit before anything is
written, the way ``buf breaking`` classifies a protobuf change.

- compatible: a row added, an alias added, a key retired, a field's attribute renamed.
  Every artifact written before still loads and means the same.
- changes the bytes freeze writes: rows reordered, a freeze kind changed, a key renamed
  with an alias or retired. Old artifacts load, but freezing again writes other bytes.
- breaking: a key removed without retiring it, renamed without an alias, a rebuild kind
  changed, a row moved to another group, an alias or a retired key dropped, a retired key
  moved to another group, a row's absent value changed. Artifacts written
  before may no longer load, or may mean something else: refused (exit 2) unless
  ``--allow-breaking``, which records the break in the lock.

Besides the rows' kinds, the lock records each row's presence, which old artifacts depend
on: when its key is written (a change changes the bytes freeze writes) and what an absent
key rebuilds to (a change is breaking), and each retired key's group. A lock written
before these records has nothing to compare for them.

A lock that cannot be read (merge-conflict markers, garbage, a malformed list of breaks,
or missing beside other generated files) is ``UnusableLock``, never "no lock": reading
it as none would turn the breaking-edit gate off and erase the recorded breaks. A lock
with conflict markers is two branches' locks: ``merge_sides`` reads both, so
``specgen generate --new-lock`` can check the merged table against each and keep both
histories of breaks.

Pure functions of plain data; the pipeline reads the old lock and the emit step writes
the new one with the rest of generated/.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.errors import GeneratorError
from generator.table import Table, Tables

LOCK_NAME = "table.lock.json"
COMPATIBLE, BYTES, BREAKING = "compatible", "changes the bytes freeze writes", "breaking"
ROW_TEXT = ("name", "key", "group", "freeze", "rebuild")
CONFLICT_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


class UnusableLock(GeneratorError):
    """A table lock that cannot be read as one; ``str()`` says why, in a few words."""


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
            "written": table.presence(row).written,
            "absent": table.presence(row).absent,
            "aliases": list(row.aliases),
        }
        for row in table.keyed
    ]


def _table_lock(table: Table) -> dict[str, Any]:
    part: dict[str, Any] = {
        "rows": lock_rows(table),
        "retired": [
            {"key": gone.key, "group": gone.group, "reason": gone.reason} for gone in table.retired
        ],
    }
    return part


def lock_of(tables: Tables, breaks: list[dict[str, Any]]) -> dict[str, Any]:
    """The lock to write: each table's rows (with their presence) and retired keys, and
    every break allowed so far."""
    return {
        "tables": {table.name: _table_lock(table) for table in tables},
        "breaks": breaks,
    }


def locked_tables(lock: dict[str, Any], first: str) -> dict[str, Any]:
    """Each table's part of a lock. A lock from before the tables were named holds one
    table's rows at its top level: the first table's."""
    if isinstance(lock.get("tables"), dict):
        return {name: part for name, part in lock["tables"].items() if isinstance(part, dict)}
    return {first: lock}


def _is_text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _part_problem(where: str, part: Any) -> str | None:
    """Why one table's part of a lock (``where``: which, for the message) is not one, or None."""
    if not isinstance(part, dict):
        return f"{where} is not an object"
    rows, retired = part.get("rows"), part.get("retired", [])
    if not isinstance(rows, list):
        return f"{where} has no list of rows"
    for number, row in enumerate(rows, start=1):
        if not (
            isinstance(row, dict)
            and all(isinstance(row.get(text), str) for text in ROW_TEXT)
            and _is_text_list(row.get("aliases", []))
        ):
            return f"{where}: row {number} is not a row ({', '.join(ROW_TEXT)}, aliases)"
    if not isinstance(retired, list) or not all(
        isinstance(gone, dict)
        and isinstance(gone.get("key"), str)
        and isinstance(gone.get("group"), str)
        for gone in retired
    ):
        return f"{where}: retired is not a list of {{key, group, reason}}"
    kinds = part.get("kinds", {})
    if not isinstance(kinds, dict) or not all(
        isinstance(kinds.get(what, {}), dict)
        and all(isinstance(v, str) for v in kinds.get(what, {}).values())
        for what in ("written_when", "absent")
    ):
        return f"{where}: kinds is not {{written_when: {{...}}, absent: {{...}}}}"
    return None


def _is_break(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("change"), str)
        and isinstance(item.get("table_sha256", ""), str)
    )


def conflict_line(text: str) -> int | None:
    """The 1-based line of the first merge-conflict marker in ``text``, or None."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(CONFLICT_MARKERS):
            return number
    return None


def parse_lock(text: str) -> dict[str, Any]:
    """A lock read from disk; ``UnusableLock`` when it is not one. Never "no lock": that
    would turn the breaking-edit gate off and erase the breaks recorded so far."""
    line = conflict_line(text)
    if line is not None:
        raise UnusableLock(f"it holds merge-conflict markers (line {line})")
    try:
        lock = json.loads(text)
    except ValueError as exc:
        raise UnusableLock(f"it is not JSON ({exc})") from None
    if not isinstance(lock, dict):
        raise UnusableLock("it is not a JSON object")
    if isinstance(lock.get("tables"), dict):
        parts = {f"table {name!r}": part for name, part in lock["tables"].items()}
    elif "tables" not in lock and "rows" in lock:
        parts = {"its table (a lock from before the tables were named)": lock}
    else:
        raise UnusableLock('it has neither "tables" nor "rows"')
    for where, part in parts.items():
        problem = _part_problem(where, part)
        if problem is not None:
            raise UnusableLock(problem)
    breaks = lock.get("breaks", [])
    if not isinstance(breaks, list):
        raise UnusableLock('its "breaks" is not a list')
    for number, item in enumerate(breaks, start=1):
        if not _is_break(item):
            raise UnusableLock(f'break {number} is not {{"change": ..., "table_sha256": ...}}')
    return lock


def merge_sides(text: str) -> tuple[str, str] | None:
    """The two sides of a lock git left with conflict markers: (ours, theirs), each the
    common lines plus its side of every conflict (a diff3 base section is left out).
    None when the markers do not nest as git writes them."""
    sides: tuple[list[str], list[str]] = ([], [])
    state = "both"  # both, ours, base, theirs
    for line in text.splitlines(keepends=True):
        marker = line[:7]
        if marker == "<<<<<<<" and state == "both":
            state = "ours"
        elif marker == "|||||||" and state == "ours":
            state = "base"
        elif marker == "=======" and state in ("ours", "base"):
            state = "theirs"
        elif marker == ">>>>>>>" and state == "theirs":
            state = "both"
        elif line.startswith(CONFLICT_MARKERS):
            return None  # a marker out of place: not git's conflict
        elif state in ("both", "ours"):
            sides[0].append(line)
            if state == "both":
                sides[1].append(line)
        elif state == "theirs":
            sides[1].append(line)
    if state != "both":
        return None
    return "".join(sides[0]), "".join(sides[1])


def readable_breaks(text: str) -> tuple[list[dict[str, Any]], int]:
    """What can be saved of an unusable lock's breaks: the well-formed entries (of both
    sides, for a conflicted lock) and how many entries could not be read."""
    sides = merge_sides(text) if conflict_line(text) is not None else (text,)
    found: list[dict[str, Any]] = []
    unread = 0
    for side in sides or (text,):
        try:
            breaks = json.loads(side).get("breaks", [])
        except (ValueError, AttributeError):
            continue
        items = breaks if isinstance(breaks, list) else [breaks]
        unread += sum(1 for item in items if not _is_break(item))
        found = merge_breaks(found, [item for item in items if _is_break(item)])
    return found, unread


def merge_breaks(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both histories of breaks: ``first``'s, then those of ``second`` it lacks."""
    return first + [item for item in second if item not in first]


def classify(lock: dict[str, Any], tables: Tables) -> Changes:
    """Classify every edit from ``lock`` (the tables as last generated) to ``tables``, a
    row's presence (when its key is written, what its absence gives) included."""
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
    old_retired = {
        (gone["key"], gone["group"]) for gone in lock.get("retired", []) if isinstance(gone, dict)
    }
    new_rows = {row["key"]: row for row in lock_rows(table)}
    aliases = {alias: row for row in new_rows.values() for alias in row["aliases"]}
    retired = {(gone.key, gone.group) for gone in table.retired}

    for key, old in old_rows.items():
        new = new_rows.get(key)
        if new is not None:
            _compare_row(key, old, new, changes)
        elif key in aliases:
            changes.bytes.append(
                f"key {key!r} renamed to {aliases[key]['key']!r}; rebuild still reads {key!r} "
                "(an alias), freeze now writes the new key"
            )
        elif (key, old["group"]) in retired:
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
    for key, group in sorted(old_retired - retired):
        back = new_rows.get(key) or aliases.get(key)
        if back is not None and back["group"] == group:
            continue  # a row reads the key again, in the same place
        moved = sorted(other for gone, other in retired if gone == key)
        if moved:
            changes.breaking.append(
                f"retired key {key!r} moved from {group} to {', '.join(moved)}: artifacts "
                f"holding it in {group} no longer load"
            )
        else:
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
    # A lock from before presence was recorded per row: nothing to compare it with.
    if old.get("absent", new["absent"]) != new["absent"]:
        changes.breaking.append(
            f"key {key!r}: a missing key now gives {new['absent']}, was {old['absent']}: old "
            "artifacts without it now mean something else"
        )
    if old.get("written", new["written"]) != new["written"]:
        changes.bytes.append(
            f"key {key!r}: now written when {new['written']}, was {old['written']}"
        )
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


def ways_forward(changes: Changes, allow: str = "specgen generate --allow-breaking") -> str:
    """The message for a refused breaking edit: each change, then what to do."""
    return (
        "the table edit breaks artifacts written before it:\n"
        + "\n".join(f"  - {item}" for item in changes.breaking)
        + '\n  Ways forward: keep reading an old key with aliases=("old_key",) on its row; '
        "retire a removed key with RetiredKey(key, group, reason) in RETIRED_KEYS; or, if the "
        f"break is deliberate, run `{allow}` to record it in "
        f"generated/{LOCK_NAME}."
    )


def record_breaks(
    breaks: list[dict[str, Any]], changes: Changes, table: Tables
) -> list[dict[str, Any]]:
    """The recorded breaks, all kept, plus these (each with the table digest that allowed it)."""
    return breaks + [{"change": item, "table_sha256": table.digest} for item in changes.breaking]


# ------------------------------------------------------------ the lock in git's history
#
# The lock on disk can be lost (``rm -rf generated``) or edited by hand; the lock as
# committed cannot. So a checkout whose history holds a lock is never a fresh project, and
# a break any committed lock recorded must still be recorded: the history of breaks only
# grows. Outside a git checkout (a copy, an export) there is no history to hold it to.

# How many of the lock's last commits are read: enough for any branch's recent history,
# few enough that ``specgen check`` stays fast (one `git log`, one `git cat-file`).
HISTORY_DEPTH = 50


def committed_locks(root: Path, relative: str) -> list[tuple[str, str]]:
    """``(commit, text)`` of the lock at ``relative`` (from ``root``) in each of the last
    commits that touched it, newest first; ``[]`` outside a git checkout or without git."""
    try:
        log = subprocess.run(
            ["git", "-C", str(root), "log", "--format=%H", f"-n{HISTORY_DEPTH}", "--", relative],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if log.returncode != 0 or not log.stdout.strip():
            return []
        commits = log.stdout.split()
        batch = subprocess.run(
            ["git", "-C", str(root), "cat-file", "--batch"],
            input="".join(f"{commit}:./{relative}\n" for commit in commits).encode(),
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    found: list[tuple[str, str]] = []
    data, at = batch.stdout, 0
    for commit in commits:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) != 3 or header[1] != b"blob":  # deleted in that commit: "missing"
            continue
        size = int(header[2])
        found.append((commit, data[at : at + size].decode("utf-8", "replace")))
        at += size + 1
    return found


def lost_breaks(lock: dict[str, Any], history: list[tuple[str, str]]) -> str | None:
    """Why ``lock`` no longer records a break a committed lock recorded (None: it records
    them all). A committed lock that cannot be read (conflict markers) is passed over."""
    kept = {(item.get("change"), item.get("table_sha256")) for item in lock.get("breaks", [])}
    for commit, text in history:
        try:
            committed = parse_lock(text)
        except UnusableLock:
            continue
        for item in committed.get("breaks", []):
            if (item.get("change"), item.get("table_sha256")) not in kept:
                return (
                    f"it no longer records the break {item.get('change')!r}, which the lock "
                    f"committed in {commit[:12]} records: the history of breaks only grows"
                )
    return None
