"""The pipeline in one call, the same for every table: load -> validate and reflect ->
kinds -> name clashes -> render -> format -> evolution lock; files in memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from generator.config import Config
from generator.emit import build_outputs, check_formatter
from generator.errors import GeneratorError
from generator.evolution import (
    LOCK_NAME,
    Changes,
    classify,
    parse_lock,
    record_breaks,
    ways_forward,
)
from generator.kinds import STEPS, check_macros, read_kinds
from generator.render import (
    check_kind_calls,
    check_name_clashes,
    known_kinds,
    make_environment,
    render_all,
)
from generator.table import Format, LoadedTable, Tables, load_format, load_tables, validate


def _environment(config: Config) -> tuple[jinja2.Environment, dict[str, tuple[str, ...]], Format]:
    """The templates' environment, once the kinds module and the macros agree; and the
    declared kinds of each step."""
    kinds = read_kinds(config.root, config.kinds)
    form = load_format(config)
    env = make_environment(config, kinds, form)
    check_macros(kinds, known_kinds(env), config.templates_name)
    return env, {step: kinds.kinds(step) for step in STEPS}, form


def _validated(
    env: jinja2.Environment,
    declared: dict[str, tuple[str, ...]],
    form: Format,
    config: Config,
    loaded: tuple[LoadedTable, ...] | None,
) -> Tables:
    found = load_tables(config) if loaded is None else loaded
    tables = Tables(tuple(validate(table, declared, form) for table in found))
    check_kind_calls(env, tables)
    check_name_clashes(env, tables, config)
    return tables


def load_validated_tables(config: Config, loaded: tuple[LoadedTable, ...] | None = None) -> Tables:
    """Every table, validated against its class, the format, the kinds the kinds module
    declares and the names the generated code binds. ``loaded`` stands in for the
    configured tables (tests)."""
    env, declared, form = _environment(config)
    return _validated(env, declared, form, config, loaded)


@dataclass
class Generated:
    """Every declared output's exact text, and how the tables changed since the lock."""

    files: dict[str, str]
    changes: Changes


def _old_lock(config: Config) -> dict[str, Any] | None:
    # Read, never written, here: the lock as last generated, if generated/ has one.
    try:
        return parse_lock((config.output / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def generate(
    config: Config,
    loaded: tuple[LoadedTable, ...] | None = None,
    *,
    allow_breaking: bool = False,
    refuse_breaking: bool = True,
) -> Generated:
    """Render every declared output, after classifying the tables' edit against the lock
    of the tables as last generated. A breaking edit is a GeneratorError unless
    ``allow_breaking``, which records it in the new lock; with ``refuse_breaking`` off
    (check, diff: they write nothing) it is only reported, and the lock shows as drift.
    Touches no file."""
    check_formatter(config)
    env, declared, form = _environment(config)
    tables = _validated(env, declared, form, config, loaded)
    lock = _old_lock(config) if LOCK_NAME in config.outputs else None
    changes = classify(lock, tables) if lock is not None else Changes()
    if changes.breaking and refuse_breaking and not allow_breaking:
        raise GeneratorError(ways_forward(changes))
    breaks = record_breaks(lock or {}, changes if allow_breaking else Changes(), tables)
    files = build_outputs(render_all(env, tables, config, breaks), tables, config)
    return Generated(files, changes)
