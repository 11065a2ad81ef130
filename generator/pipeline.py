"""The pipeline in one call: load table -> validate -> render -> format -> files in memory."""

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
from generator.kinds import STEPS, KindFacts, check_macros, read_kinds
from generator.render import (
    check_kind_calls,
    check_name_clashes,
    known_kinds,
    make_environment,
    render_all,
)
from generator.table import LoadedTable, Table, load_table, validate


def _environment(config: Config) -> tuple[jinja2.Environment, KindFacts]:
    """The templates' environment, once the kinds module and the macros agree."""
    kinds = read_kinds(config.root, config.kinds)
    env = make_environment(config, kinds)
    check_macros(kinds, known_kinds(env), config.templates_name)
    return env, kinds


def _validated(
    env: jinja2.Environment, kinds: KindFacts, config: Config, loaded: LoadedTable | None
) -> Table:
    declared = {step: kinds.kinds(step) for step in STEPS}
    table = validate(load_table(config) if loaded is None else loaded, declared)
    check_kind_calls(env, table)
    check_name_clashes(env, table, config)
    return table


def load_validated_table(config: Config, loaded: LoadedTable | None = None) -> Table:
    """The table, validated against the spec class, the kinds the kinds module declares
    and the names the generated code binds. ``loaded`` stands in for the configured table
    (tests)."""
    return _validated(*_environment(config), config, loaded)


@dataclass
class Generated:
    """Every declared output's exact text, and how the table changed since the lock."""

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
    loaded: LoadedTable | None = None,
    *,
    allow_breaking: bool = False,
    refuse_breaking: bool = True,
) -> Generated:
    """Render every declared output, after classifying the table edit against the lock
    of the table as last generated. A breaking edit is a GeneratorError unless
    ``allow_breaking``, which records it in the new lock; with ``refuse_breaking`` off
    (check, diff: they write nothing) it is only reported, and the lock shows as drift.
    Touches no file."""
    check_formatter(config)
    env, kinds = _environment(config)
    table = _validated(env, kinds, config, loaded)
    lock = _old_lock(config) if LOCK_NAME in config.outputs else None
    changes = classify(lock, table) if lock is not None else Changes()
    if changes.breaking and refuse_breaking and not allow_breaking:
        raise GeneratorError(ways_forward(changes))
    breaks = record_breaks(lock or {}, changes if allow_breaking else Changes(), table)
    files = build_outputs(render_all(env, table, config, breaks), table, config)
    return Generated(files, changes)
