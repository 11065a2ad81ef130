"""The pipeline in one call, the same for every table: load -> validate and reflect ->
kinds -> name clashes -> render -> format -> evolution lock; files in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jinja2

from generator.blocks import Blocks, check_name_clashes, make_blocks
from generator.config import Config
from generator.emit import build_outputs, check_formatter
from generator.errors import GeneratorError
from generator.evolution import (
    LOCK_NAME,
    Changes,
    UnusableLock,
    classify,
    committed_locks,
    conflict_line,
    lock_of,
    lost_breaks,
    merge_breaks,
    merge_sides,
    parse_lock,
    readable_breaks,
    record_breaks,
    ways_forward,
)
from generator.kinds import KindFacts, read_kinds
from generator.render import make_environment, render_all
from generator.table import Format, LoadedTable, Tables, load_format, load_tables, validate


def _environment(config: Config) -> tuple[jinja2.Environment, KindFacts, Format]:
    """The templates' environment, the kinds module's records and the format module."""
    form = load_format(config)
    kinds = read_kinds(config.root, config.kinds, form.module)
    return make_environment(config, kinds, form), kinds, form


def _validated(
    kinds: KindFacts,
    form: Format,
    config: Config,
    loaded: tuple[LoadedTable, ...] | None,
) -> tuple[Tables, Blocks]:
    found = load_tables(config) if loaded is None else loaded
    tables = Tables(tuple(validate(table, kinds, form) for table in found))
    blocks = make_blocks(kinds, form.module, tables)
    check_name_clashes(blocks, tables, config.output_name)
    return tables, blocks


def load_validated_tables(config: Config, loaded: tuple[LoadedTable, ...] | None = None) -> Tables:
    """Every table, validated against its class, the format, the kinds the kinds module
    declares and the names the generated code binds. ``loaded`` stands in for the
    configured tables (tests)."""
    _, kinds, form = _environment(config)
    return _validated(kinds, form, config, loaded)[0]


@dataclass
class Generated:
    """Every declared output's exact text, how the tables changed since the lock, and
    what the command line should say about a lock it replaced."""

    files: dict[str, str]
    changes: Changes
    notes: list[str] = field(default_factory=list)


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


def generate(
    config: Config,
    loaded: tuple[LoadedTable, ...] | None = None,
    *,
    allow_breaking: bool = False,
    refuse_breaking: bool = True,
    new_lock: bool = False,
) -> Generated:
    """Render every declared output, after classifying the tables' edit against the lock
    of the tables as last generated. A breaking edit is a GeneratorError unless
    ``allow_breaking``, which records it in the new lock; with ``refuse_breaking`` off
    (check, diff: they write nothing) it is only reported, and the lock shows as drift.
    An unusable lock is a GeneratorError naming the way out, unless ``new_lock``, which
    replaces it (and only it: a usable lock is never replaced). Touches no file."""
    check_formatter(config)
    env, kinds, form = _environment(config)
    tables, blocks = _validated(kinds, form, config, loaded)
    changes = Changes()
    breaks: list[dict[str, Any]] = []
    notes: list[str] = []
    if new_lock and LOCK_NAME not in config.outputs:
        raise GeneratorError(
            f"--new-lock writes {config.output_name}/{LOCK_NAME}, which is no declared output "
            "in [tool.specgen] of pyproject.toml: run `specgen generate`"
        )
    if LOCK_NAME in config.outputs:
        old = _read_old_lock(config)
        where = f"{config.output_name}/{LOCK_NAME}"
        if old.problem is not None and not new_lock:
            raise GeneratorError(
                f"{where} is unusable: {old.problem}. It records the table as last generated "
                "and the breaks allowed so far; without it no table edit can be checked.\n  "
                f"Way out: {_way_out(old, config.output_name)}."
            )
        if old.problem is None and new_lock:
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
    if changes.breaking and refuse_breaking and not allow_breaking:
        allow = "specgen generate --new-lock --allow-breaking" if new_lock else None
        raise GeneratorError(ways_forward(changes, *(allow,) if allow else ()))
    breaks = record_breaks(breaks, changes if allow_breaking else Changes(), tables)
    files = build_outputs(
        render_all(env, tables, config, blocks, lock_of(tables, breaks)), tables, config
    )
    return Generated(files, changes, notes)
