"""The pipeline in one call, the same for every table: load, validate, settle the lock,
decide the blocks, render each output once, format; files in memory."""

from __future__ import annotations

from dataclasses import dataclass, field

import jinja2

from .blocks import make_blocks
from .cache import use_folder
from .config import Config
from .emit import build_outputs, check_formatter
from .evolution import Changes, LockMode, lock_of, settle
from .kinds import KindFacts, read_kinds
from .render import make_environment, render_outputs
from .table import Format, LoadedTable, Tables, import_module, load_format, load_tables, validate


def _environment(
    config: Config, loaded: tuple[LoadedTable, ...] | None = None
) -> tuple[jinja2.Environment, KindFacts, Format, Tables]:
    """The templates' environment, the kinds module's records, the format module and every
    table, validated; ``loaded`` stands in for the configured tables (tests)."""
    form = load_format(config)
    use_folder(config.root)
    kinds = read_kinds(config.root, import_module(config.kinds, config.root, "kinds"))
    env = make_environment(config, kinds, form)
    found = load_tables(config) if loaded is None else loaded
    return env, kinds, form, Tables(tuple(validate(table, kinds, form) for table in found))


def load_validated_tables(config: Config, loaded: tuple[LoadedTable, ...] | None = None) -> Tables:
    """Every table, validated; ``loaded`` stands in for the configured tables (tests)."""
    return _environment(config, loaded)[3]


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
    env, kinds, form, tables = _environment(config, loaded)
    changes, breaks, notes = settle(config, tables, mode)
    blocks = make_blocks(kinds, form.module, tables)
    sources = render_outputs(env, tables, config, blocks, lock_of(tables, breaks))
    return Generated(build_outputs(sources, tables, config, kinds.source_file), changes, notes)
