"""Reading the table lock: from disk or git's history, the two sides of a conflicted one,
the breaks any lock text still holds. What it means is ``generator.evolution``."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from .config import Config
from .errors import GeneratorError

LOCK_NAME = "table.lock.json"
LOCK_VERSION = 2  # 1 recorded kind names, which a synonym changed
ROW_FIELDS = ("name", "key", "group", "freeze", "written", "rebuild", "absent")
RETIRED = ("key", "group", "reason")
MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
# The form of a lock: a str or int stands for its type, a list for items of its one
# item's form, "*" for any key.
BREAK = {"change": "", "table_sha256": ""}
ROW = {**dict.fromkeys(ROW_FIELDS, ""), "aliases": [""]}
TABLE = {"rows": [ROW], "retired": [dict.fromkeys(RETIRED, "")]}
FORM = {"version": 0, "tables": {"*": TABLE}, "breaks": [BREAK]}


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
        raise UnusableLock(
            "it is not of a lock's form (tables of rows and retired keys, breaks)", text
        )
    return lock  # type: ignore[no-any-return]


# One conflict as git writes it: ours, a diff3 base (left out), theirs.
CONFLICT = re.compile(
    r"^<<<<<<<.*\n((?:.*\n)*?)"  # ours
    r"(?:^\|{7}.*\n(?:.*\n)*?)?"  # a diff3 base
    r"^=======.*\n((?:.*\n)*?)^>>>>>>>.*(?:\n|\Z)",  # theirs
    re.MULTILINE,
)


def merge_sides(text: str) -> tuple[str, str] | None:
    """(ours, theirs) of a conflicted lock, a diff3 base left out; None without markers, or
    where they do not nest as git writes them (a marker is left in a side)."""
    ours, theirs = (CONFLICT.sub(side, text) for side in (r"\1", r"\2"))
    if ours == text or conflict_line(ours) or conflict_line(theirs):
        return None
    return ours, theirs


def readable_breaks(*texts: str) -> tuple[list[dict[str, Any]], int]:
    """The well-formed breaks of lock texts (both sides of a conflict), each once, in order;
    and how many entries were not well-formed."""
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
        log = subprocess.run(
            [*git, "log", "--format=%H", "-n50", "--", relative],
            capture_output=True,
            text=True,
            timeout=30,
        )
        commits = log.stdout.split() if log.returncode == 0 else []
        asked = "".join(f"{commit}:./{relative}\n" for commit in commits).encode()
        data = subprocess.run(
            [*git, "cat-file", "--batch"], input=asked, capture_output=True, timeout=30
        ).stdout
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
