"""The evolution gate: every table edit is classified against the lock of the tables as
last generated (compatible, changes bytes, breaking: refused unless recorded) before
anything is written. A lock that cannot be read is never "no lock"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .config import Config
from .errors import GeneratorError
from .lockfile import (
    LOCK_NAME,
    LOCK_VERSION,
    RETIRED,
    ROW_FIELDS,
    UnusableLock,
    committed_locks,
    conflict_line,
    merge_sides,
    parse_lock,
    read_lock,
    readable_breaks,
)
from .table import Table, Tables


class Effect(Enum):
    """What a table edit does to artifacts written before it; the value names the list of
    ``Changes`` that holds such an edit."""

    BREAKING = "breaking"
    BYTES = "bytes"
    COMPATIBLE = "compatible"

    @property
    def title(self) -> str:
        """How the command line heads the edits of this effect."""
        return "changes the bytes freeze writes" if self is Effect.BYTES else self.value


BREAKING, BYTES, COMPATIBLE = Effect.BREAKING, Effect.BYTES, Effect.COMPATIBLE
# A row's field, the effect of a change to it, and what the change means.
# fmt: off
ROW_CHANGES = (
    ("group", BREAKING, "moved from {old} to {new}: old artifacts hold it in the other place"),
    ("rebuild", BREAKING, "rebuild kind {old} -> {new}: old artifacts may no longer load, or "
     "mean something else"),
    ("absent", BREAKING, "a missing key now gives {new}, was {old}: old artifacts without it "
     "now mean something else"),
    ("freeze", BYTES, "freeze kind {old} -> {new}"),
    ("written", BYTES, "now written when {new}, was {old}"),
    ("name", COMPATIBLE, "spec attribute {old} -> {new}"),
)
# fmt: on


@dataclass
class Changes:
    """The classified edits between the lock and the tables, each one line."""

    compatible: list[str] = field(default_factory=list)
    bytes: list[str] = field(default_factory=list)
    breaking: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compatible or self.bytes or self.breaking)

    def add(self, effect: Effect, text: str) -> None:
        """Record one edit under its effect."""
        getattr(self, effect.value).append(text)

    def report(self) -> str:
        """Every change under its effect, for the command line."""
        return "\n".join(
            f"  {effect.title}: {item}" for effect in Effect for item in getattr(self, effect.value)
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
            changes.add(effect, f"{table.name} table: {text}")
    return changes


Edit = tuple[Effect, str]


def _row_edits(
    old: dict[str, Any], new: dict[str, Any], retired: set[tuple[str, str]], gained: set[str]
) -> Iterator[Edit]:
    """The edits to the rows, by key: changed, renamed, removed, added (changing the bytes
    where the key is in ``gained``, written even at its absent value); aliases too."""
    aliases = {alias: row for row in new.values() for alias in row["aliases"]}
    for key, was in old.items():
        if (now := new.get(key)) is not None:
            yield from _kept_row_edits(key, was, now)
        elif key in aliases:
            yield BYTES, (
                f"key {key!r} renamed to {aliases[key]['key']!r}; rebuild still reads {key!r} "
                "(an alias), freeze now writes the new key"
            )
        elif (key, was["group"]) not in retired:
            yield _gone_row_edit(key, was, new)
    for key, row in new.items():
        if key in old:
            for alias in row["aliases"]:
                if alias not in old[key]["aliases"]:
                    yield COMPATIBLE, f"alias {alias!r} added to key {key!r}"
        elif not set(row["aliases"]) & set(old):
            yield _added_row_edit(key, row, key in gained)


def _kept_row_edits(key: str, was: dict[str, Any], now: dict[str, Any]) -> Iterator[Edit]:
    """What changed in a row whose key stays: its recorded facts, its dropped aliases."""
    for name, effect, text in ROW_CHANGES:
        if was[name] != now[name]:
            yield effect, f"key {key!r}: " + text.format(old=was[name], new=now[name])
    for alias in was["aliases"]:
        if alias not in now["aliases"]:
            yield BREAKING, f"alias {alias!r} of key {key!r} dropped: artifacts holding {alias!r} no longer load"


def _gone_row_edit(key: str, was: dict[str, Any], new: dict[str, Any]) -> Edit:
    """A key no row reads any more, neither as key nor alias, and not retired: a break."""
    renamed = next((r["key"] for r in new.values() if r["name"] == was["name"]), None)
    if renamed:
        return (
            BREAKING,
            f"key {key!r} renamed to {renamed!r} without an alias: artifacts holding {key!r} no longer load",
        )
    return (
        BREAKING,
        f"key {key!r} ({was['name']}) removed without retiring it: artifacts holding it no longer load",
    )


def _added_row_edit(key: str, row: dict[str, Any], gained: bool) -> Edit:
    """A new row: compatible, or changing the bytes where it is written at its absent value."""
    added = f"row added: {row['name']} (key {key!r}, {row['group']})"
    if gained:
        return BYTES, (
            f"{added}, written even at its absent value {row['absent']}: older "
            "artifacts frozen again gain the key"
        )
    return COMPATIBLE, added


def _retirements(
    old_retired: set[tuple[str, str]], now_retired: set[tuple[str, str]], new: dict[str, Any]
) -> Iterator[Edit]:
    """The keys retired since the lock, and the retirements undone or moved."""
    aliases = {alias: row for row in new.values() for alias in row["aliases"]}
    for key, group in sorted(now_retired - old_retired):
        yield BYTES, (
            f"key {key!r} retired ({group}): rebuild accepts and drops it, so freeze drops {key} "
            "from artifacts that hold it"
        )
    for key, group in sorted(old_retired - now_retired):
        back = new.get(key) or aliases.get(key)
        if back is not None and back["group"] == group:
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
        sides = [parse_lock(side) for side in merge_sides(text or "") or ()]
    except UnusableLock:
        sides = []
    breaks, unread = readable_breaks(text) if text is not None else ([], 0)
    for _, committed in reversed(history):  # breaks the file lost: committed locks hold them
        older = readable_breaks(committed)[0]
        breaks = older + [item for item in breaks if item not in older]
    against = [classify(side, tables) for side in sides] or [Changes()]
    recorded = {item["change"] for item in breaks}
    found = (c for a in against for c in a.breaking if c not in recorded)  # one side's: none
    changes = Changes(against[0].compatible, against[0].bytes, list(dict.fromkeys(found)))
    if sides:
        note = (
            "merged both sides of the conflict; the table was checked against each branch's "
            f"lock, and both histories of breaks ({len(breaks)}) are kept"
        )
    else:
        note = (
            "written anew from the table as it is; table edits since the last usable lock were "
            f"not checked. Kept {len(breaks)} recorded break(s), git's history's included"
            + f"; {unread} entry(ies) of breaks could not be read and are gone" * bool(unread)
        )
    return changes, breaks, [f"specgen: {where}: {note}"]


def settle(
    config: Config, tables: Tables, mode: LockMode
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """The table edit settled by ``mode``: the changes, the breaks kept, notes for the user."""
    where = f"{config.output_name}/{LOCK_NAME}"
    if LOCK_NAME not in config.outputs:
        if mode.new_lock:
            raise GeneratorError(
                f"--new-lock writes {where}, which is no declared output in "
                "[tool.specgen] of pyproject.toml: run `specgen generate`"
            )
        return Changes(), [], []
    history = committed_locks(config)
    try:
        lock, commit = read_lock(config, history)
    except UnusableLock as exc:
        if not mode.new_lock:
            raise GeneratorError(
                f"{where} is unusable: {exc}. It records the table as last generated and the "
                "breaks allowed so far: no table edit can be checked without it.\n  Way out: "
                + (
                    "leave the lock as git left it, and run `specgen generate --new-lock`: it "
                    "checks the merged table against both branches' locks and keeps both "
                    "histories of breaks."
                    if conflict_line(exc.text or "")
                    else f"restore it from git (`git checkout -- {where}`), keeping its breaks; or "
                    "write it anew with `specgen generate --new-lock` (edits since the last "
                    "usable lock go unchecked)."
                )
            ) from None
        changes, breaks, notes = _new_lock(exc.text, tables, history, where)
    else:
        if mode.new_lock:
            raise GeneratorError(
                f"--new-lock replaces an unusable {where}, but "
                + ("there is none yet" if lock is None else "it is usable")
                + ": run `specgen generate` (with --allow-breaking to accept a breaking edit)"
            )
        changes = classify(lock, tables) if lock is not None else Changes()
        breaks = list(lock["breaks"]) if lock is not None else []
        notes = []
        if commit:
            notes.append(
                f"specgen: {where} is gone: the table was checked against the lock committed "
                f"in {commit[:12]}, whose breaks are kept"
            )
    if changes.breaking and mode.writes and not mode.allow_breaking:
        allow = "--new-lock --allow-breaking" if mode.new_lock else "--allow-breaking"
        raise GeneratorError(
            "the table edit breaks artifacts written before it:\n"
            + "\n".join(f"  - {item}" for item in changes.breaking)
            + '\n  Ways forward: keep reading an old key with aliases=("old_key",) on its row; '
            "retire a removed key with RetiredKey(key, group, reason) in RETIRED_KEYS; or, if "
            f"the break is deliberate, run `specgen generate {allow}` to record it in {where}."
        )
    if mode.writes and mode.allow_breaking:
        breaks += [{"change": item, "table_sha256": tables.digest} for item in changes.breaking]
    return changes, breaks, notes
