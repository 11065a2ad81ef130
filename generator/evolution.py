"""The evolution gate: every table edit is classified against the lock of the tables as last
generated (compatible, changes bytes, breaking: refused unless recorded) before anything is
written. A lock that cannot be read (from disk, git's history, a conflict) is never "no lock"."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from subprocess import DEVNULL
from typing import Any

from .config import Config
from .errors import GeneratorError
from .table import Table, Tables

LOCK_NAME = "table.lock.json"
LOCK_VERSION = 2  # 1 recorded kind names, which a synonym changed
ROW_FIELDS = ("name", "key", "group", "freeze", "written", "rebuild", "absent")
RETIRED = ("key", "group", "reason")
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
# A lock's form: a str or int stands for its type, a list for its items' form, "*" any key.
BREAK = {"change": "", "table_sha256": ""}
ROW = {**dict.fromkeys(ROW_FIELDS, ""), "aliases": [""]}
TABLE = {"rows": [ROW], "retired": [dict.fromkeys(RETIRED, "")]}
FORM = {"version": 0, "tables": {"*": TABLE}, "breaks": [BREAK]}
# One conflict as git writes it: ours, a diff3 base (left out), theirs.
CONFLICT = re.compile(
    r"^<<<<<<<.*\n((?:.*\n)*?)"  # ours
    r"(?:^\|{7}.*\n(?:.*\n)*?)?"  # a diff3 base
    r"^=======.*\n((?:.*\n)*?)^>>>>>>>.*(?:\n|\Z)",  # theirs
    re.MULTILINE,
)
# What a table edit does to artifacts written before it: the list of ``Changes`` it is in.
BREAKING, BYTES, COMPATIBLE = "breaking", "bytes", "compatible"
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
Edit = tuple[str, str]  # an effect, and what the edit is


class UnusableLock(GeneratorError):
    """A lock that cannot be read as one: ``str()`` says why, ``text`` is what was read."""

    def __init__(self, problem: str, text: str | None = None) -> None:
        super().__init__(problem)
        self.text = text


def _fits(value: Any, form: Any) -> bool:
    if isinstance(form, list):
        return isinstance(value, list) and all(_fits(item, form[0]) for item in value)
    if isinstance(form, dict) and "*" in form:
        return isinstance(value, dict) and all(_fits(v, form["*"]) for v in value.values())
    if isinstance(form, dict):
        return isinstance(value, dict) and all(_fits(value.get(k), f) for k, f in form.items())
    return type(value) is type(form)


def conflict_line(text: str) -> int | None:
    """The 1-based line of the first merge-conflict marker in ``text``, or None."""
    lines = enumerate(text.splitlines(), start=1)
    return next((number for number, line in lines if line.startswith(MARKERS)), None)


def parse_lock(text: str) -> dict[str, Any]:
    """A lock read from disk or git; ``UnusableLock`` when it is not one."""
    if (line := conflict_line(text)) is not None:
        raise UnusableLock(f"it holds merge-conflict markers (line {line})", text)
    try:
        lock = json.loads(text)
    except ValueError as exc:
        raise UnusableLock(f"it is not JSON ({exc})", text) from None
    version = lock.get("version") if isinstance(lock, dict) else None
    if version != LOCK_VERSION:
        raise UnusableLock(f"it is no lock of version {LOCK_VERSION} (version: {version!r})", text)
    if not _fits(lock, FORM):
        raise UnusableLock("its form is not a lock's (tables of rows, retired keys, breaks)", text)
    return lock  # type: ignore[no-any-return]


def merge_sides(text: str) -> tuple[str, str] | None:
    """(ours, theirs) of a conflicted lock; None without markers nested as git writes them."""
    ours, theirs = (CONFLICT.sub(side, text) for side in (r"\1", r"\2"))
    if ours == text or conflict_line(ours) or conflict_line(theirs):
        return None
    return ours, theirs


def readable_breaks(*texts: str) -> tuple[list[dict[str, Any]], int]:
    """The well-formed breaks of lock texts (both sides of a conflict) and how many are not."""
    found: list[dict[str, Any]] = []
    unread: list[Any] = []
    for side in (side for text in texts for side in merge_sides(text) or (text,)):
        try:
            breaks = json.loads(side).get("breaks", [])
        except (ValueError, AttributeError):
            continue
        for item in breaks if isinstance(breaks, list) else [breaks]:
            if item not in (kept := found if _fits(item, BREAK) else unread):
                kept.append(item)
    return found, len(unread)


def committed_locks(config: Config) -> list[tuple[str, str]]:
    """``(commit, text)`` of the lock in the last 50 commits that touched it, newest first
    (``[]`` outside git): what a deleted generated/ or a hand edit cannot erase."""
    relative, git = f"{config.output_name}/{LOCK_NAME}", ["git", "-C", str(config.root)]
    try:
        log = [*git, "log", "--format=%H", "-n50", "--", relative]
        commits = subprocess.check_output(log, stderr=DEVNULL, timeout=30).decode().split()
        asked = "".join(f"{commit}:./{relative}\n" for commit in commits).encode()
        cat = [*git, "cat-file", "--batch"]
        data = subprocess.check_output(cat, input=asked, stderr=DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for commit in commits:
        header, _, data = data.partition(b"\n")
        if not header.endswith(b" missing"):  # else deleted in that commit
            size = int(header.split()[2])
            found.append((commit, data[:size].decode("utf-8", "replace")))
            data = data[size + 1 :]
    return found


def read_lock(config: Config, history: list[tuple[str, str]]) -> tuple[Any, str]:
    """The lock as last generated (None: a fresh project), and its commit when read from git."""
    path, others = config.output / LOCK_NAME, set(config.outputs) - {LOCK_NAME}
    if not path.exists() and not any((config.output / name).exists() for name in others):
        commit, text = history[0] if history else ("", "")  # no history: a fresh project
        try:
            return (parse_lock(text) if text else None), commit
        except UnusableLock as exc:
            problem = f"the lock committed in {commit[:12]} is unusable ({exc})"
            raise UnusableLock(problem, text) from None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnusableLock("it is missing, but the other generated files are there") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableLock(f"it cannot be read ({exc})") from None
    lock = parse_lock(text)
    for commit, committed in history:
        for item in readable_breaks(committed)[0]:
            if item not in lock["breaks"]:
                problem = f"it no longer records the break {item['change']!r} of {commit[:12]}"
                raise UnusableLock(problem, text)
    return lock, ""


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
            f"  {'changes the bytes freeze writes' if effect == BYTES else effect}: {item}"
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
        gained = {r.key for r in table.keyed if table.crossing_of(r).written_at_absent}
        was_retired = {(gone["key"], gone["group"]) for gone in locked["retired"]}
        edits = [*_row_edits(old, new, retired, gained), *_retirements(was_retired, retired, new)]
        for group in sorted({row["group"] for row in new.values()}):  # the key order freeze writes
            before = [k for k, row in old.items() if row["group"] == group and k in new]
            after = [k for k, row in new.items() if row["group"] == group and k in old]
            if before != after:
                edits.append((BYTES, f"{group} rows reordered: {', '.join(after)}"))
        for effect, text in edits:
            getattr(changes, effect).append(f"{table.name} table: {text}")
    return changes


def _row_edits(
    old: dict[str, Any], new: dict[str, Any], retired: set[tuple[str, str]], gained: set[str]
) -> Iterator[Edit]:
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
        gains = (
            f", written even at its absent value {row['absent']}: older artifacts frozen again "
            "gain the key"
        )
        yield (BYTES, added + gains) if key in gained else (COMPATIBLE, added)


def _kept_row_edits(key: str, was: dict[str, Any], now: dict[str, Any]) -> Iterator[Edit]:
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
    for key, group in sorted(now_retired - old_retired):
        yield BYTES, (
            f"key {key!r} retired ({group}): rebuild accepts and drops it, so freeze drops {key} "
            "from artifacts that hold it"
        )
    for key, group in sorted(old_retired - now_retired):
        if group in (r["group"] for r in new.values() if key in (r["key"], *r["aliases"])):
            continue  # a row reads it again, in place
        moved = ", ".join(sorted(other for gone, other in now_retired if gone == key))
        yield BREAKING, (
            f"retired key {key!r} moved from {group} to {moved}: artifacts holding it in {group} "
            "no longer load"
            if moved
            else f"retired key {key!r} dropped: artifacts holding it no longer load"
        )


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
    """``--new-lock``: checked against each side of a conflict; every break still readable kept."""
    try:
        sides = [parse_lock(side) for side in merge_sides(text or "") or ()]
    except UnusableLock:
        sides = []
    # Breaks the file lost are in the locks committed (newest first), which come first.
    breaks, unread = readable_breaks(*(committed for _, committed in history), text or "")
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


def settle(
    config: Config, tables: Tables, mode: LockMode
) -> tuple[Changes, list[dict[str, Any]], list[str]]:
    """The table edit settled by ``mode``: the changes, the breaks kept, notes for the user."""
    where, declared = f"{config.output_name}/{LOCK_NAME}", LOCK_NAME in config.outputs
    history = committed_locks(config) if declared else []
    try:
        lock, commit = read_lock(config, history) if declared else (None, "")
    except UnusableLock as exc:
        if not mode.new_lock:
            raise GeneratorError(
                f"{where} is unusable: {exc}; leave the lock as git left it, and run `specgen "
                "generate --new-lock` to merge it"
                if conflict_line(exc.text or "")
                else f"{where} is unusable: {exc}; restore it from git (`git checkout -- "
                f"{where}`), or write it anew with `specgen generate --new-lock` (edits since the "
                "last usable lock go unchecked)"
            ) from None
        changes, breaks, notes = _new_lock(exc.text, tables, history, where)
    else:
        if mode.new_lock:
            state = "usable" if lock else "absent" if declared else "no declared output"
            raise GeneratorError(
                f"--new-lock replaces an unusable {where}; it is {state}: run `specgen generate`"
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
