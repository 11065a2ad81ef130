"""The pipeline in one call: load table -> validate -> render -> format -> files in memory."""

from __future__ import annotations

import jinja2

from generator.config import Config
from generator.emit import build_outputs, check_formatter
from generator.render import check_name_clashes, known_kinds, make_environment, render_all
from generator.table import LoadedTable, Table, load_table, validate


def _validated(env: jinja2.Environment, config: Config, loaded: LoadedTable | None) -> Table:
    table = validate(load_table(config) if loaded is None else loaded, known_kinds(env))
    check_name_clashes(env, table, config)
    return table


def load_validated_table(config: Config, loaded: LoadedTable | None = None) -> Table:
    """The table, validated against the spec class, the kinds the templates know and the
    names the generated code binds. ``loaded`` stands in for the configured table (tests)."""
    return _validated(make_environment(config), config, loaded)


def generate(config: Config, loaded: LoadedTable | None = None) -> dict[str, str]:
    """Every declared output's exact text, keyed by file name. Touches no file."""
    check_formatter(config)
    env = make_environment(config)
    table = _validated(env, config, loaded)
    return build_outputs(render_all(env, table, config), table, config)
