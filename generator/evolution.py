"""Safe evolution of the field tables: every edit is classified against the lock of the
tables as last generated (``generated/table.lock.json``) before anything is written, as
``buf breaking`` classifies a protobuf change: compatible; changes the bytes freeze
writes (old artifacts load, freezing again writes other bytes); or breaking, refused
(exit 2) unless ``--allow-breaking`` records it in the lock (README "Evolving the table").

The lock records meanings, not kind names (per row: the records freeze and rebuild call,
when the key is written, what its absence gives), so a synonym is no change. A lock that
cannot be read is ``UnusableLock``, never "no lock", which would turn the gate off and
erase the breaks; with generated/ gone, the lock last committed stands in for it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

from generator.config import Config
from generator.errors import GeneratorError
from generator.table import Table, Tables

LOCK_NAME = "table.lock.json"
LOCK_VERSION = 2  # 1: kind names in the rows, which a synonym changed
COMPATIBLE, BYTES, BREAKING = "compatible", "changes the bytes freeze writes", "breaking"
ROW_FIELDS = ("name", "key", "group", "freeze", "written", "rebuild", "absent")
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
HISTORY_DEPTH = 50  # the lock's last commits read for its breaks: one git log, one cat-file


class UnusableLock(GeneratorError):
    """A table lock that cannot be read as one; ``str()`` says why, in a few words."""


@dataclass
class Changes:
    """The classified edits between the lock and the tables, each one line."""

    compatible: list[str] = field(default_factory=list)
    bytes: list[str] = field(default_factory=list)
    breaking: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compatible or self.bytes or self.breaking)

    def report(self) -> str:
        """Every change under its class, for the command line."""
        classes = ((BREAKING, self.breaking), (BYTES, self.bytes), (COMPATIBLE, self.compatible))
        return "\n".join(f"  {title}: {item}" for title, items in classes for item in items)


def _row(table: Table, row: Any) -> dict[str, Any]:
    """What a row means to artifacts: its key, group, and the records its kind names stand
    for with the presence they resolve to (never the names: a synonym is no change)."""
    presence, freeze, rebuild = (
        table.presence(row),
        table.record(row, "freeze"),
        table.record(row, "rebuild"),
    )
    values = (row.name, row.key, row.group, freeze, presence.written, rebuild, presence.absent)
    return {**dict(zip(ROW_FIELDS, values, strict=True)), "aliases": list(row.aliases)}


def lock_of(tables: Tables, breaks: list[dict[str, Any]]) -> dict[str, Any]:
    """The lock to write: each table's keyed rows and retired keys, and every break allowed
    so far (each with the table digest that allowed it)."""
    parts = {
        table.name: {
            "rows": [_row(table, row) for row in table.keyed],
            "retired": [
                {"key": g.key, "group": g.group, "reason": g.reason} for g in table.retired
            ],
        }
        for table in tables
    }
    return {"version": LOCK_VERSION, "tables": parts, "breaks": breaks}


def _is_break(item: Any) -> bool:
    return isinstance(item, dict) and _texts(item, ("change", "table_sha256"))


def _texts(item: Any, names: tuple[str, ...]) -> bool:
    return all(isinstance(item.get(name), str) for name in names)


def _part_problem(name: str, part: Any) -> str | None:
    try:
        rows, retired = part["rows"], part["retired"]
        for number, row in enumerate(rows, start=1):
            if not (_texts(row, ROW_FIELDS) and all(isinstance(a, str) for a in row["aliases"])):
                return (
                    f"table {name!r}: row {number} is not a row ({', '.join(ROW_FIELDS)}, aliases)"
                )
        if all(_texts(gone, ("key", "group", "reason")) for gone in retired):
            return None
    except (TypeError, KeyError, AttributeError):
        pass
    return f"table {name!r} is not {{rows: [{{{', '.join(ROW_FIELDS)}, aliases}}], retired: [...]}}"


def conflict_line(text: str) -> int | None:
    """The 1-based line of the first merge-conflict marker in ``text``, or None."""
    lines = enumerate(text.splitlines(), start=1)
    return next((number for number, line in lines if line.startswith(MARKERS)), None)


def parse_lock(text: str) -> dict[str, Any]:
    """A lock read from disk or git; ``UnusableLock`` when it is not one."""
    if conflict_line(text) is not None:
        raise UnusableLock(f"it holds merge-conflict markers (line {conflict_line(text)})")
    try:
        lock = json.loads(text)
    except ValueError as exc:
        raise UnusableLock(f"it is not JSON ({exc})") from None
    if not isinstance(lock, dict) or not isinstance(lock.get("tables"), dict):
        raise UnusableLock('it is not a JSON object with "tables"')
    if lock.get("version") != LOCK_VERSION:
        raise UnusableLock(f"it is of an older format (version {lock.get('version', 1)!r}; "
                           f"this generator writes {LOCK_VERSION}, which records meanings)")  # fmt: skip
    for problem in (_part_problem(name, part) for name, part in lock["tables"].items()):
        if problem is not None:
            raise UnusableLock(problem)
    if not isinstance(lock.get("breaks"), list):
        raise UnusableLock('its "breaks" is not a list')
    for number, item in enumerate(lock["breaks"], start=1):
        if not _is_break(item):
            raise UnusableLock(f'break {number} is not {{"change": ..., "table_sha256": ...}}')
    return lock


def merge_sides(text: str) -> tuple[str, str] | None:
    """(ours, theirs) of a lock git left with conflict markers: the common lines plus each
    side of every conflict (a diff3 base is left out); None when the markers do not nest
    as git writes them."""
    sides: tuple[list[str], list[str]] = ([], [])
    state = "both"
    moves = {("<<<<<<<", "both"): "ours", ("|||||||", "ours"): "base"}
    moves.update({("=======", "ours"): "theirs", ("=======", "base"): "theirs"})
    moves[(">>>>>>>", "theirs")] = "both"
    for line in text.splitlines(keepends=True):
        if line.startswith(MARKERS):
            if (line[:7], state) not in moves:
                return None
            state = moves[(line[:7], state)]
            continue
        for side, states in zip(sides, (("both", "ours"), ("both", "theirs")), strict=True):
            if state in states:
                side.append(line)
    return ("".join(sides[0]), "".join(sides[1])) if state == "both" else None


def readable_breaks(text: str) -> tuple[list[dict[str, Any]], int]:
    """The well-formed breaks of any lock text, of any format (of both sides, for a
    conflicted one), and how many entries could not be read."""
    found: list[dict[str, Any]] = []
    unread = 0
    for side in (merge_sides(text) if conflict_line(text) else None) or (text,):
        try:
            breaks = json.loads(side).get("breaks", [])
        except (ValueError, AttributeError):
            continue
        items = breaks if isinstance(breaks, list) else [breaks]
        unread += sum(not _is_break(item) for item in items)
        found = merge_breaks(found, [item for item in items if _is_break(item)])
    return found, unread


def merge_breaks(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both histories of breaks: ``first``'s, then those of ``second`` it lacks."""
    return first + [item for item in second if item not in first]


# A row's field, the class of a change to it, and what the change means.
ROW_CHANGES = (
    ("group", BREAKING, "moved from {old} to {new}: old artifacts hold it in the other place"),
    ("rebuild", BREAKING, "rebuild kind {old} -> {new}: old artifacts may no longer load, or "
     "mean something else"),
    ("absent", BREAKING, "a missing key now gives {new}, was {old}: old artifacts without it "
     "now mean something else"),
    ("freeze", BYTES, "freeze kind {old} -> {new}"),
    ("written", BYTES, "now written when {new}, was {old}"),
    ("name", COMPATIBLE, "spec attribute {old} -> {new}"),
)  # fmt: skip


def classify(lock: dict[str, Any], tables: Tables) -> Changes:
    """Classify every edit from ``lock`` (the tables as last generated) to ``tables``."""
    changes = Changes()
    for table in tables:
        part = lock["tables"].get(table.name, {"rows": [], "retired": []})
        _classify_table(part, table, f"{table.name} table: ", changes)
    return changes


def _classify_table(lock: dict[str, Any], table: Table, label: str, changes: Changes) -> None:
    def add(kind: str, text: str) -> None:
        getattr(changes, {BYTES: "bytes"}.get(kind, kind)).append(label + text)

    old = {row["key"]: row for row in lock["rows"]}
    new = {row["key"]: row for row in (_row(table, r) for r in table.keyed)}
    aliases = {alias: row for row in new.values() for alias in row["aliases"]}
    old_retired = {(gone["key"], gone["group"]) for gone in lock["retired"]}
    retired = {(gone.key, gone.group) for gone in table.retired}
    for key, was in old.items():
        now = new.get(key)
        if now is not None:
            for name, kind, text in ROW_CHANGES:
                if was[name] != now[name]:
                    add(kind, f"key {key!r}: " + text.format(old=was[name], new=now[name]))
            for alias in (alias for alias in was["aliases"] if alias not in now["aliases"]):
                add(BREAKING, f"alias {alias!r} of key {key!r} dropped: artifacts holding "
                    f"{alias!r} no longer load")  # fmt: skip
        elif key in aliases:
            add(BYTES, f"key {key!r} renamed to {aliases[key]['key']!r}; rebuild still reads "
                f"{key!r} (an alias), freeze now writes the new key")  # fmt: skip
        elif (key, was["group"]) not in retired:
            renamed = next((r["key"] for r in new.values() if r["name"] == was["name"]), None)
            add(BREAKING, f"key {key!r} renamed to {renamed!r} without an alias: artifacts "
                f"holding {key!r} no longer load" if renamed else f"key {key!r} "
                f"({was['name']}) removed without retiring it: artifacts holding it no "
                "longer load")  # fmt: skip
    for key, row in new.items():
        for alias in row["aliases"] if key in old else ():
            if alias not in old[key]["aliases"]:
                add(COMPATIBLE, f"alias {alias!r} added to key {key!r}")
        if key not in old and not set(row["aliases"]) & set(old):
            add(COMPATIBLE, f"row added: {row['name']} (key {key!r}, {row['group']})")
    for key, group in sorted(retired - old_retired):
        add(BYTES, f"key {key!r} retired ({group}): rebuild accepts and drops it, so freeze "
            f"drops {key} from artifacts that hold it")  # fmt: skip
    for key, group in sorted(old_retired - retired):
        back = new.get(key) or aliases.get(key)
        moved = sorted(other for gone, other in retired if gone == key)
        if back is None or back["group"] != group:  # else a row reads it again, in place
            add(BREAKING, f"retired key {key!r} moved from {group} to {', '.join(moved)}: "
                f"artifacts holding it in {group} no longer load" if moved else
                f"retired key {key!r} dropped: artifacts holding it no longer load")  # fmt: skip
    for group in sorted({row["group"] for row in new.values()}):  # the key order freeze writes
        before = [k for k, row in old.items() if row["group"] == group and k in new]
        after = [k for k, row in new.items() if row["group"] == group and k in old]
        if before != after:
            add(BYTES, f"{group} rows reordered: {', '.join(after)}")


def committed_locks(config: Config) -> list[tuple[str, str]]:
    """``(commit, text)`` of the lock in each of the last commits that touched it, newest
    first; ``[]`` outside a git checkout or without git. A deleted ``generated/`` or
    breaks trimmed by hand cannot erase what was committed."""
    relative = f"{config.output_name}/{LOCK_NAME}"
    git = ["git", "-C", str(config.root)]
    try:
        log = subprocess.run(
            [*git, "log", "--format=%H", f"-n{HISTORY_DEPTH}", "--", relative],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        commits = log.stdout.split() if log.returncode == 0 else []
        batch = subprocess.run(
            [*git, "cat-file", "--batch"],
            input="".join(f"{commit}:./{relative}\n" for commit in commits).encode(),
            capture_output=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    found, data, at = [], batch.stdout, 0
    for commit in commits:
        end = data.index(b"\n", at)
        header, at = data[at:end].split(), end + 1
        if len(header) == 3 and header[1] == b"blob":  # else deleted in that commit
            size = int(header[2])
            found.append((commit, data[at : at + size].decode("utf-8", "replace")))
            at += size + 1
    return found


@dataclass(frozen=True)
class LockMode:
    """What a run does with a breaking edit and an unusable lock, decided once by the
    command line (``from_command``): check and diff (``writes`` False) only report."""

    writes: bool = True
    allow_breaking: bool = False  # a breaking edit is recorded, not refused
    new_lock: bool = False  # an unusable lock is replaced (and only one)

    @classmethod
    def from_command(cls, command: str, allow_breaking: bool, new_lock: bool) -> LockMode:
        """The mode of a command and its flags."""
        return cls(True, allow_breaking, new_lock) if command == "generate" else cls(False)


class _Unusable(GeneratorError):
    def __init__(self, problem: str, text: str | None) -> None:
        super().__init__(problem)
        self.problem, self.text = problem, text


def _read_old_lock(config: Config, history: list[tuple[str, str]]) -> tuple[Any, str]:
    """The lock as last generated (None: a fresh project) and, where generated/ is gone,
    the commit it was read from; ``_Unusable`` naming why it cannot be read."""
    path, others = config.output / LOCK_NAME, set(config.outputs) - {LOCK_NAME}
    if config.output.exists() and not config.output.is_dir():
        return None, ""  # not a lock problem: the writing step refuses it
    if not path.exists() and not any((config.output / name).exists() for name in others):
        if not history:  # nothing generated, nothing committed: a fresh project
            return None, ""
        try:
            return parse_lock(history[0][1]), history[0][0]
        except UnusableLock as exc:
            problem = f"the lock committed in {history[0][0][:12]} is unusable ({exc})"
            raise _Unusable(problem, history[0][1]) from None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Unusable("it is missing, but the other generated files are there", None) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Unusable(f"it cannot be read ({exc})", None) from None
    try:
        lock = parse_lock(text)
    except UnusableLock as exc:
        raise _Unusable(str(exc), text) from None
    for commit, committed in history:
        for item in readable_breaks(committed)[0]:
            if item not in lock["breaks"]:
                raise _Unusable(
                    f"it no longer records the break {item['change']!r}, which the lock "
                    f"committed in {commit[:12]} records: the history of breaks only grows",
                    text,
                )
    return lock, ""


def _new_lock(
    text: str | None, tables: Tables, history: list[tuple[str, str]], where: str
) -> tuple[Changes, list[dict[str, Any]], str]:
    """``--new-lock``: the changes and breaks of a lock replacing an unusable one. Of a
    conflict's two locks: the tables checked against each (a break one branch recorded is
    no change for the other) and both histories of breaks kept."""
    sides = merge_sides(text) if text and conflict_line(text) else None
    try:
        ours, theirs = (parse_lock(side) for side in sides) if sides else (None, None)
    except UnusableLock:
        ours = theirs = None
    if ours is not None and theirs is not None:
        against_ours, against_theirs = classify(ours, tables), classify(theirs, tables)
        breaks = merge_breaks(ours["breaks"], theirs["breaks"])
        recorded = {item["change"] for item in breaks}
        breaking = dict.fromkeys(against_ours.breaking + against_theirs.breaking)
        changes = Changes(against_ours.compatible, against_ours.bytes)
        changes.breaking = [change for change in breaking if change not in recorded]
        return changes, breaks, (
            f"specgen: {where}: merged both sides of the conflict; the table was checked "
            f"against each branch's lock, and both histories of breaks ({len(breaks)}) are kept"
        )  # fmt: skip
    breaks, unread = readable_breaks(text) if text is not None else ([], 0)
    kept = len(breaks)
    for _, committed in reversed(history):  # breaks the file lost: committed locks hold them
        breaks = merge_breaks(readable_breaks(committed)[0], breaks)
    return Changes(), breaks, (
        f"specgen: {where}: written anew from the table as it is; table edits since the last "
        f"usable lock were not checked. Kept {len(breaks)} recorded break(s)"
        + (f"; {unread} entry(ies) of breaks could not be read and are gone" if unread else "")
        + (" (a missing lock's breaks are only in git)" if text is None else "")
        + (f", {len(breaks) - kept} of them restored from git's history" * (len(breaks) > kept))
    )  # fmt: skip


def settle(
    config: Config, tables: Tables, mode: LockMode
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """The tables' edit against the lock as last generated, settled by ``mode``: the
    changes, the breaks the new lock keeps, and what to tell the user."""
    where = f"{config.output_name}/{LOCK_NAME}"
    if LOCK_NAME not in config.outputs and mode.new_lock:
        raise GeneratorError(
            f"--new-lock writes {where}, which is no declared output in [tool.specgen] of "
            "pyproject.toml: run `specgen generate`"
        )
    if LOCK_NAME not in config.outputs:
        return Changes(), [], []
    history = committed_locks(config)
    changes, breaks, notes = Changes(), list[dict[str, Any]](), list[str]()
    try:
        lock, commit = _read_old_lock(config, history)
    except _Unusable as exc:
        if not mode.new_lock:
            conflicted = exc.text is not None and conflict_line(exc.text) is not None
            raise GeneratorError(
                f"{where} is unusable: {exc.problem}. It records the table as last generated "
                "and the breaks allowed so far; without it no table edit can be checked.\n  "
                "Way out: " + (
                    "resolve the table (and the dataclass) as the merge should be, leave the "
                    "lock as git left it, and run `specgen generate --new-lock`: it checks the "
                    "merged table against both branches' locks and keeps both histories of breaks"
                    if conflicted else
                    f"restore it from git (`git checkout -- {where}`), which keeps its history "
                    "of breaks; or, deliberately, write it anew from the table as it is with "
                    "`specgen generate --new-lock` (the edits since the last usable lock go "
                    "unchecked)"
                ) + "."
            ) from None  # fmt: skip
        changes, breaks, note = _new_lock(exc.text, tables, history, where)
        notes.append(note)
    else:
        if mode.new_lock:
            raise GeneratorError(
                f"--new-lock replaces an unusable {where}, but "
                + ("there is none yet" if lock is None else "it is usable")
                + ": run `specgen generate` (with --allow-breaking to accept a breaking edit)"
            )
        if lock is not None:
            changes, breaks = classify(lock, tables), list(lock["breaks"])
        if commit:
            notes.append(
                f"specgen: {where} is gone: the table was checked against the lock committed "
                f"in {commit[:12]}, whose breaks are kept"
            )
    if changes.breaking and mode.writes and not mode.allow_breaking:
        allow = "specgen generate --new-lock --allow-breaking" if mode.new_lock else None
        raise GeneratorError(ways_forward(changes, *(allow,) if allow else ()))
    if mode.writes and mode.allow_breaking:
        breaks += [{"change": item, "table_sha256": tables.digest} for item in changes.breaking]
    return changes, breaks, notes


def ways_forward(changes: Changes, allow: str = "specgen generate --allow-breaking") -> str:
    """The message for a refused breaking edit: each change, then what to do."""
    return (
        "the table edit breaks artifacts written before it:\n"
        + "\n".join(f"  - {item}" for item in changes.breaking)
        + '\n  Ways forward: keep reading an old key with aliases=("old_key",) on its row; '
        "retire a removed key with RetiredKey(key, group, reason) in RETIRED_KEYS; or, if the "
        f"break is deliberate, run `{allow}` to record it in generated/{LOCK_NAME}."
    )
