"""The pipeline in one call: load table -> validate -> render -> format -> files in memory."""

from __future__ import annotations

from generator.config import Config
from generator.emit import build_outputs, check_formatter
from generator.render import known_kinds, make_environment, render_all
from generator.table import Table, load_table, validate


def load_validated_table(config: Config) -> Table:
    """The table, validated against the spec class and the kinds the templates know."""
    env = make_environment(config.templates)
    return validate(load_table(config), known_kinds(env))


def generate(config: Config) -> dict[str, str]:
    """Every output file's exact text, keyed by file name. Touches no file."""
    check_formatter(config)
    env = make_environment(config.templates)
    table = validate(load_table(config), known_kinds(env))
    return build_outputs(render_all(env, table, config), table, config)
