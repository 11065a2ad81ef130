"""The evolution gate: every table edit is classified against the lock of the tables as
last generated (compatible, changes bytes, breaking: refused unless recorded) before
anything is written. A lock that cannot be read is never "no lock"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import lockfile
from .config import Config
from .errors import GeneratorError
from .lockfile import LOCK_NAME, LOCK_VERSION, RETIRED, ROW_FIELDS, UnusableLock
from .table import Table, Tables

# What a table edit does to artifacts written before it: the list of ``Changes`` it is in.
BREAKING, BYTES, COMPATIBLE = "breaking", "bytes", "compatible"
TITLES = {BYTES: "changes the bytes freeze writes"}  # how the command line heads them
# What a change to a row's recorded field means, by effect.
ROW_CHANGES = {
    BREAKING: {
        "group": "moved from {old} to {new}: old artifacts hold it in the other place",
        "rebuild": "rebuild kind {old} -> {new}: old artifacts may no longer load, or "
        "mean something else",
        "absent": "a missing key now gives {new}, was {old}: old artifacts without it "
        "now mean something else",
    },
    BYTES: {"freeze": "freeze kind {old} -> {new}", "written": "now written when {new}, was {old}"},
    COMPATIBLE: {"name": "spec attribute {old} -> {new}"},
}


@dataclass
class Changes:
    """The classified edits between the lock and the tables, each one line."""

    compatible: list[str] = field(default_factory=list)
    bytes: list[str] = field(default_factory=list)
    breaking: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compatible or self.bytes or self.breaking)

    def report(self) -> str:
        """Every change under its effect, for the command line."""
        return "\n".join(
            f"  {TITLES.get(effect, effect)}: {item}"
            for effect in (BREAKING, BYTES, COMPATIBLE)
            for item in getattr(self, effect)
        )


def _row(table: Table, row: Any) -> dict[str, Any]:
    """What a row means to artifacts: never its kind names (a synonym is no change)."""
    crossing = table.crossing_of(row)
    meaning = (crossing.freeze, str(crossing.written), crossing.rebuild, crossing.absent)
    values = (row.name, row.key, row.group, *meaning)
    return {**dict(zip(ROW_FIELDS, values, strict=True)), "aliases": list(row.aliases)}


def lock_of(tables: Tables, breaks: list[dict[str, Any]]) -> dict[str, Any]:
    """The lock to write: each table's keyed rows and retired keys, and every break so far."""
    parts = {
        table.name: {
            "rows": [_row(table, row) for row in table.keyed],
            "retired": [{name: getattr(g, name) for name in RETIRED} for g in table.retired],
        }
        for table in tables
    }
    return {"version": LOCK_VERSION, "tables": parts, "breaks": breaks}


def classify(lock: dict[str, Any], tables: Tables) -> Changes:
    """Classify every edit from ``lock`` (the tables as last generated) to ``tables``."""
    changes = Changes()
    for table in tables:
        locked = lock["tables"].get(table.name, {"rows": [], "retired": []})
        old = {row["key"]: row for row in locked["rows"]}
        new = {row["key"]: row for row in (_row(table, r) for r in table.keyed)}
        retired = {(gone.key, gone.group) for gone in table.retired}
        # An added row freeze writes even at its absent value gives every older artifact
        # its key when that artifact is frozen again.
        gained = {r.key for r in table.keyed if table.crossing_of(r).written_at_absent}
        for effect, text in [
            *_row_edits(old, new, retired, gained),
            *_retirements(
                {(gone["key"], gone["group"]) for gone in locked["retired"]}, retired, new
            ),
            *_reorders(old, new),
        ]:
            getattr(changes, effect).append(f"{table.name} table: {text}")
    return changes


Edit = tuple[str, str]  # an effect, and what the edit is


def _row_edits(
    old: dict[str, Any], new: dict[str, Any], retired: set[tuple[str, str]], gained: set[str]
) -> Iterator[Edit]:
    """The edits to the rows, by key: changed, renamed, removed (unless retired), added."""
    aliases = {alias: row["key"] for row in new.values() for alias in row["aliases"]}
    names = {row["name"]: key for key, row in new.items()}  # a renamed key keeps its attribute
    for key, was in old.items():
        if key in new:
            yield from _kept_row_edits(key, was, new[key])
        elif key in aliases:
            yield BYTES, (
                f"key {key!r} renamed to {aliases[key]!r}; rebuild still reads {key!r} "
                "(an alias), freeze now writes the new key"
            )
        elif (key, was["group"]) in retired:
            continue  # its retirement is an edit of its own
        elif was["name"] in names:
            yield BREAKING, (
                f"key {key!r} renamed to {names[was['name']]!r} without an alias: artifacts "
                f"holding {key!r} no longer load"
            )
        else:
            yield BREAKING, (
                f"key {key!r} ({was['name']}) removed without retiring it: artifacts holding it "
                "no longer load"
            )
    for key, row in new.items():
        if key in old or set(row["aliases"]) & set(old):
            continue  # kept, or renamed with an alias
        added = f"row added: {row['name']} (key {key!r}, {row['group']})"
        if key in gained:
            yield BYTES, (
                f"{added}, written even at its absent value {row['absent']}: older "
                "artifacts frozen again gain the key"
            )
        else:
            yield COMPATIBLE, added


def _kept_row_edits(key: str, was: dict[str, Any], now: dict[str, Any]) -> Iterator[Edit]:
    """What changed in a row whose key stays: its recorded facts, its aliases."""
    for effect, texts in ROW_CHANGES.items():
        for name, text in texts.items():
            if was[name] != now[name]:
                yield effect, f"key {key!r}: " + text.format(old=was[name], new=now[name])
    for alias in was["aliases"]:
        if alias not in now["aliases"]:
            yield BREAKING, f"alias {alias!r} of key {key!r} dropped: artifacts holding {alias!r} no longer load"
    for alias in now["aliases"]:
        if alias not in was["aliases"]:
            yield COMPATIBLE, f"alias {alias!r} added to key {key!r}"


def _retirements(
    old_retired: set[tuple[str, str]], now_retired: set[tuple[str, str]], new: dict[str, Any]
) -> Iterator[Edit]:
    """The keys retired since the lock, and the retirements undone or moved."""
    for key, group in sorted(now_retired - old_retired):
        yield BYTES, (
            f"key {key!r} retired ({group}): rebuild accepts and drops it, so freeze drops {key} "
            "from artifacts that hold it"
        )
    for key, group in sorted(old_retired - now_retired):
        if group in (r["group"] for r in new.values() if key in (r["key"], *r["aliases"])):
            continue  # a row reads it again, in place
        moved = sorted(other for gone, other in now_retired if gone == key)
        if moved:
            yield BREAKING, (
                f"retired key {key!r} moved from {group} to {', '.join(moved)}: artifacts "
                f"holding it in {group} no longer load"
            )
        else:
            yield BREAKING, f"retired key {key!r} dropped: artifacts holding it no longer load"


def _reorders(old: dict[str, Any], new: dict[str, Any]) -> Iterator[Edit]:
    """A group whose kept keys come in another order: the key order freeze writes."""
    for group in sorted({row["group"] for row in new.values()}):
        before = [k for k, row in old.items() if row["group"] == group and k in new]
        after = [k for k, row in new.items() if row["group"] == group and k in old]
        if before != after:
            yield BYTES, f"{group} rows reordered: {', '.join(after)}"


@dataclass(frozen=True)
class LockMode:
    """What a run does with a breaking edit and an unusable lock; check and diff only report."""

    writes: bool = True
    allow_breaking: bool = False  # a breaking edit is recorded, not refused
    new_lock: bool = False  # an unusable lock is replaced (and only one)

    @classmethod
    def from_command(cls, command: str, allow_breaking: bool, new_lock: bool) -> LockMode:
        """The mode of a command and its flags."""
        return cls(True, allow_breaking, new_lock) if command == "generate" else cls(False)


def _new_lock(
    text: str | None, tables: Tables, history: list[tuple[str, str]], where: str
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """``--new-lock``: the changes and breaks of a lock replacing an unusable one, checked
    against each side of a conflict; every break it and git's history hold kept."""
    try:
        sides = [lockfile.parse_lock(side) for side in lockfile.merge_sides(text or "") or ()]
    except UnusableLock:
        sides = []
    # Breaks the file lost are in the locks committed (newest first), which come first.
    breaks, unread = lockfile.readable_breaks(*(committed for _, committed in history), text or "")
    against = [classify(side, tables) for side in sides] or [Changes()]
    recorded = {item["change"] for item in breaks}
    found = (c for a in against for c in a.breaking if c not in recorded)  # one side's: none
    changes = Changes(against[0].compatible, against[0].bytes, list(dict.fromkeys(found)))
    note = (
        f"merged both sides of the conflict, checked against each; kept {len(breaks)} break(s)"
        if sides
        else f"written anew from the table as it is, edits since the last usable lock unchecked; "
        f"kept {len(breaks)} break(s)"
        + f"; {unread} entry(ies) of breaks could not be read and are gone" * bool(unread)
    )
    return changes, breaks, [f"specgen: {where}: {note}"]


def _unusable(where: str, exc: UnusableLock) -> str:
    way_out = (
        "leave the lock as git left it, and run `specgen generate --new-lock` to merge it"
        if lockfile.conflict_line(exc.text or "")
        else f"restore it from git (`git checkout -- {where}`), or write it anew with `specgen "
        "generate --new-lock` (edits since the last usable lock go unchecked)"
    )
    return f"{where} is unusable: {exc}; {way_out}"


def settle(
    config: Config, tables: Tables, mode: LockMode
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """The table edit settled by ``mode``: the changes, the breaks kept, notes for the user."""
    where, declared = f"{config.output_name}/{LOCK_NAME}", LOCK_NAME in config.outputs
    history = lockfile.committed_locks(config) if declared else []
    try:
        lock, commit = lockfile.read_lock(config, history) if declared else (None, "")
    except UnusableLock as exc:
        if not mode.new_lock:
            raise GeneratorError(_unusable(where, exc)) from None
        changes, breaks, notes = _new_lock(exc.text, tables, history, where)
    else:
        if mode.new_lock:
            state = (
                "there is none yet" if declared else "it is no declared output in [tool.specgen]"
            )
            raise GeneratorError(
                f"--new-lock replaces an unusable {where}, but {'it is usable' if lock else state}: "
                "run `specgen generate`"
            )
        changes = classify(lock, tables) if lock else Changes()
        breaks = list(lock["breaks"]) if lock else []
        notes = [
            f"specgen: {where} is gone: checked against the lock committed in {commit[:12]}, "
            "whose breaks are kept"
        ] * bool(commit)
    if changes.breaking and mode.writes and not mode.allow_breaking:
        allow = "--new-lock --allow-breaking" if mode.new_lock else "--allow-breaking"
        raise GeneratorError(
            "the table edit breaks old artifacts:\n"
            + "".join(f"  - {item}\n" for item in changes.breaking)
            + '  Add aliases=("old_key",) to the row, or RetiredKey(key, group, reason) to '
            f"RETIRED_KEYS; or record the break: `specgen generate {allow}`."
        )
    if mode.writes and mode.allow_breaking:
        breaks += [{"change": item, "table_sha256": tables.digest} for item in changes.breaking]
    return changes, breaks, notes
