"""The pipeline in one call, the same for every table: load, validate, check the names,
settle the lock, render, format; files in memory."""

from __future__ import annotations

from dataclasses import dataclass, field

import jinja2

from .blocks import Blocks, make_blocks
from .config import Config
from .emit import build_outputs, check_formatter
from .evolution import Changes, LockMode, lock_of, settle
from .kinds import KindFacts, read_kinds
from .render import make_environment, render_outputs
from .table import Format, LoadedTable, Tables, import_module, load_format, load_tables, validate


def _environment(config: Config) -> tuple[jinja2.Environment, KindFacts, Format]:
    """The templates' environment, the kinds module's records and the format module."""
    form = load_format(config)
    kinds = read_kinds(config.root, import_module(config.kinds, config.root, "kinds"))
    return make_environment(config, kinds, form), kinds, form


def _validated(
    env: jinja2.Environment,
    kinds: KindFacts,
    form: Format,
    config: Config,
    loaded: tuple[LoadedTable, ...] | None,
) -> tuple[Tables, Blocks]:
    found = load_tables(config) if loaded is None else loaded
    tables = Tables(tuple(validate(table, kinds, form) for table in found))
    return tables, make_blocks(kinds, form.module, tables)


def load_validated_tables(config: Config, loaded: tuple[LoadedTable, ...] | None = None) -> Tables:
    """Every table, validated; ``loaded`` stands in for the configured tables (tests)."""
    return _validated(*_environment(config), config, loaded)[0]


@dataclass
class Generated:
    """Every declared output's exact text, the table edit, and notes on a replaced lock."""

    files: dict[str, str]
    changes: Changes
    notes: list[str] = field(default_factory=list)


def generate(
    config: Config,
    loaded: tuple[LoadedTable, ...] | None = None,
    *,
    mode: LockMode = LockMode(),  # noqa: B008 (frozen: one value, never mutated)
) -> Generated:
    """Render every declared output once ``mode`` settled the table edit; touches no file."""
    check_formatter(config)
    env, kinds, form = _environment(config)
    tables, blocks = _validated(env, kinds, form, config, loaded)
    changes, breaks, notes = settle(config, tables, mode)
    sources = render_outputs(env, tables, config, blocks, lock_of(tables, breaks))
    return Generated(build_outputs(sources, tables, config, kinds.source_file), changes, notes)
