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

The whole policy lives here: reading the lock as last generated (from generated/, or from
git's history when the file is gone), classifying the edit, and settling it by one
``LockMode`` the command line decides (``settle``). The emit step writes the new lock
with the rest of generated/.
"""

from __future__ import annotations

import enum
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config
from .errors import GeneratorError
from .table import Table, Tables

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


# ---------------------------------------------------------------- the lock's policy


class LockMode(enum.Enum):
    """What a run does with a breaking edit and an unusable lock, decided once by the
    command line (``from_command``), as black's ``WriteBack`` is."""

    REPORT = "report"  # check, diff: a breaking edit is reported; they write nothing
    REFUSE_BREAKING = "refuse"  # generate: a breaking edit exits 2 with the ways forward
    ALLOW_BREAKING = "allow"  # generate --allow-breaking: the break is recorded
    NEW_LOCK = "new"  # generate --new-lock: an unusable lock is replaced
    NEW_LOCK_ALLOW_BREAKING = "new-allow"  # both

    @classmethod
    def from_command(cls, command: str, allow_breaking: bool, new_lock: bool) -> LockMode:
        """The mode of a command and its flags."""
        if command != "generate":
            return cls.REPORT
        if new_lock:
            return cls.NEW_LOCK_ALLOW_BREAKING if allow_breaking else cls.NEW_LOCK
        return cls.ALLOW_BREAKING if allow_breaking else cls.REFUSE_BREAKING

    @property
    def new_lock(self) -> bool:
        """An unusable lock is replaced (and only one: a usable lock never is)."""
        return self in (LockMode.NEW_LOCK, LockMode.NEW_LOCK_ALLOW_BREAKING)

    @property
    def records_breaks(self) -> bool:
        """A breaking edit is accepted and recorded in the new lock."""
        return self in (LockMode.ALLOW_BREAKING, LockMode.NEW_LOCK_ALLOW_BREAKING)

    @property
    def refuses_breaks(self) -> bool:
        """A breaking edit is a GeneratorError naming the ways forward."""
        return self in (LockMode.REFUSE_BREAKING, LockMode.NEW_LOCK)


@dataclass
class _OldLock:
    """The lock as last generated, read from disk: ``lock`` None for a fresh project (no
    generated file at all), ``text`` None when the file is missing, ``problem`` why it is
    unusable (None: usable)."""

    lock: dict[str, Any] | None
    text: str | None = None
    problem: str | None = None
    history: list[tuple[str, str]] = field(default_factory=list)  # for lost breaks
    from_commit: str | None = None  # the lock was read from git: the file is gone


def _way_out(old: _OldLock, output: str) -> str:
    """What to do about an unusable lock: restore it from git, or replace it deliberately."""
    where = f"{output}/{LOCK_NAME}"
    if old.text is not None and conflict_line(old.text) is not None:
        return (
            "resolve the table (and the dataclass) as the merge should be, leave the lock as "
            "git left it, and run `specgen generate --new-lock`: it checks the merged table "
            "against both branches' locks and keeps both histories of breaks"
        )
    return (
        f"restore it from git (`git checkout -- {where}`), which keeps its history of breaks; "
        "or, deliberately, write it anew from the table as it is with "
        "`specgen generate --new-lock` (the edits since the last usable lock go unchecked)"
    )


def _read_old_lock(config: Config) -> _OldLock:
    # Read, never written, here: the lock as last generated.
    path = config.output / LOCK_NAME
    history = committed_locks(config.root, f"{config.output_name}/{LOCK_NAME}")
    if not config.output.is_dir():
        # No generated/ folder: a fresh project, unless git's history holds a lock (it was
        # deleted: compare with the lock as last committed). Something else by that name:
        # not a lock problem, and the writing step refuses it as what it is.
        return _from_history(history) if not config.output.exists() else _OldLock(None)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        others = [name for name in config.outputs if name != LOCK_NAME]
        if not any((config.output / name).exists() for name in others):
            return _from_history(history)  # nothing generated yet, or all of it deleted
        return _OldLock(None, problem="it is missing, but the other generated files are there")
    except (OSError, UnicodeDecodeError) as exc:
        return _OldLock(None, problem=f"it cannot be read ({exc})")
    try:
        lock = parse_lock(text)
    except UnusableLock as exc:
        return _OldLock(None, text, str(exc))
    lost = lost_breaks(lock, history)
    return _OldLock(lock, text) if lost is None else _OldLock(None, text, lost, history)


def _from_history(history: list[tuple[str, str]]) -> _OldLock:
    """The lock as last committed, for a checkout whose generated lock is gone; none (a
    fresh project) when git's history holds no lock either."""
    if not history:
        return _OldLock(None)
    commit, text = history[0]
    try:
        return _OldLock(parse_lock(text), text, from_commit=commit)
    except UnusableLock as exc:
        return _OldLock(None, text, f"the lock committed in {commit[:12]} is unusable ({exc})")


def _merged(text: str, tables: Tables) -> tuple[Changes, list[dict[str, Any]]] | None:
    """For a lock git left with conflict markers, when both sides are locks: the merged
    table's changes against each branch's lock (a break one branch recorded is no change
    for the other), and both branches' breaks."""
    sides = merge_sides(text)
    if sides is None:
        return None
    try:
        ours, theirs = parse_lock(sides[0]), parse_lock(sides[1])
    except UnusableLock:
        return None
    against_ours, against_theirs = (
        classify(ours, tables),
        classify(theirs, tables),
    )
    recorded_ours = {item["change"] for item in ours.get("breaks", [])}
    recorded_theirs = {item["change"] for item in theirs.get("breaks", [])}
    breaking = [c for c in against_ours.breaking if c not in recorded_theirs]
    breaking += [c for c in against_theirs.breaking if c not in recorded_ours and c not in breaking]
    changes = Changes(against_ours.compatible, against_ours.bytes, breaking)
    return changes, merge_breaks(ours.get("breaks", []), theirs.get("breaks", []))


def _new_lock(
    old: _OldLock, tables: Tables, output: str
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """``--new-lock``: the changes and breaks of a lock that replaces an unusable one."""
    where = f"{output}/{LOCK_NAME}"
    conflicted = old.text is not None and conflict_line(old.text) is not None
    if conflicted and (merged := _merged(old.text or "", tables)) is not None:
        changes, breaks = merged
        return (
            changes,
            breaks,
            [
                f"specgen: {where}: merged both sides of the conflict; the table was checked "
                f"against each branch's lock, and both histories of breaks ({len(breaks)}) are kept"
            ],
        )
    breaks, unread = readable_breaks(old.text) if old.text is not None else ([], 0)
    kept = len(breaks)
    for _, text in reversed(old.history):  # breaks the file lost: committed locks hold them
        breaks = merge_breaks(readable_breaks(text)[0], breaks)
    notes = [
        f"specgen: {where}: written anew from the table as it is; table edits since the last "
        f"usable lock were not checked. Kept {len(breaks)} recorded break(s)"
        + (f"; {unread} entry(ies) of breaks could not be read and are gone" if unread else "")
        + (" (a missing lock's breaks are only in git)" if old.text is None else "")
        + (
            f", {len(breaks) - kept} of them restored from git's history"
            if len(breaks) > kept
            else ""
        )
    ]
    return Changes(), breaks, notes


def settle(
    config: Config, tables: Tables, mode: LockMode
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """The tables' edit against the lock as last generated, settled by ``mode``: the
    changes, the breaks the new lock keeps, and what to tell the user. A breaking edit is
    a GeneratorError where the mode refuses it; an unusable lock is one naming the way
    out unless the mode replaces it."""
    changes = Changes()
    breaks: list[dict[str, Any]] = []
    notes: list[str] = []
    if mode.new_lock and LOCK_NAME not in config.outputs:
        raise GeneratorError(
            f"--new-lock writes {config.output_name}/{LOCK_NAME}, which is no declared output "
            "in [tool.specgen] of pyproject.toml: run `specgen generate`"
        )
    if LOCK_NAME in config.outputs:
        old = _read_old_lock(config)
        where = f"{config.output_name}/{LOCK_NAME}"
        if old.problem is not None and not mode.new_lock:
            raise GeneratorError(
                f"{where} is unusable: {old.problem}. It records the table as last generated "
                "and the breaks allowed so far; without it no table edit can be checked.\n  "
                f"Way out: {_way_out(old, config.output_name)}."
            )
        if old.problem is None and mode.new_lock:
            raise GeneratorError(
                f"--new-lock replaces an unusable {where}, but "
                + ("there is none yet" if old.lock is None else "it is usable")
                + ": run `specgen generate` (with --allow-breaking to accept a breaking edit)"
            )
        if old.problem is not None:
            changes, breaks, notes = _new_lock(old, tables, config.output_name)
        elif old.lock is not None:
            changes = classify(old.lock, tables)
            breaks = list(old.lock.get("breaks", []))
            if old.from_commit is not None:
                notes.append(
                    f"specgen: {where} is gone: the table was checked against the lock "
                    f"committed in {old.from_commit[:12]}, whose breaks are kept"
                )
    if changes.breaking and mode.refuses_breaks:
        allow = "specgen generate --new-lock --allow-breaking" if mode.new_lock else None
        raise GeneratorError(ways_forward(changes, *(allow,) if allow else ()))
    breaks = record_breaks(breaks, changes if mode.records_breaks else Changes(), tables)
    return changes, breaks, notes
