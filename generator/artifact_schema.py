"""The facts the artifact's schema and field reference are rendered from: the table's
rows, each rebuild kind's schema fragment (templates/kinds.schema.json) and the
placement and Target grammars. Plain data in, plain data out; no torch."""

from __future__ import annotations

import json
from typing import Any

import jinja2

from generator.errors import GeneratorError
from generator.table import EXEMPT, INJECTIONS, PARAM_PLAN, Row, Table
from shardplan.artifact.plan_meta import MATCH_KEY
from shardplan.convert.placement_text import PLACEMENT_PATTERN
from shardplan.convert.targets import DOTTED_PATH_PATTERN

KIND_SCHEMAS = "kinds.schema.json"
SCHEMA_ID = "https://specgen.invalid/schemas/codegen_meta.schema.json"


def kind_schemas(env: jinja2.Environment, table: Table) -> dict[str, dict[str, Any]]:
    """Each rebuild kind's ``{"shows": ..., "schema": ...}``; every kind the table uses
    must have one (a kind without its fragment would leave its keys unchecked)."""
    loader = env.loader
    assert loader is not None
    folder = env.globals.get("templates_folder", "templates")
    try:
        text, _, _ = loader.get_source(env, KIND_SCHEMAS)
        fragments = json.loads(text)
    except jinja2.TemplateNotFound:
        raise GeneratorError(
            f"{folder}/{KIND_SCHEMAS} is missing: it holds the JSON Schema fragment of each "
            "rebuild kind; restore it"
        ) from None
    except ValueError as exc:
        raise GeneratorError(f"{folder}/{KIND_SCHEMAS} is not valid JSON: {exc}") from None
    missing = sorted({row.rebuild for row in table.rows if row.group != EXEMPT} - set(fragments))
    if missing:
        raise GeneratorError(
            f"{folder}/{KIND_SCHEMAS} has no fragment for rebuild kind "
            f"{', '.join(map(repr, missing))}: add {{\"shows\": ..., \"schema\": ...}} for it "
            "beside its macro in kinds.j2"
        )
    return {kind: fragments[kind] for kind in fragments if not kind.startswith("$")}


def _properties(
    rows: tuple[Row, ...], retired: list[tuple[str, str]], kinds: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for row in rows:
        properties[row.key] = {
            "title": row.key,
            "description": row.doc,
            **kinds[row.rebuild]["schema"],
        }
    for row in rows:
        for alias in row.aliases:
            properties[alias] = {
                "title": alias,
                "description": f"Older name of {row.key!r}, still read: {row.doc}",
                "deprecated": True,
                **kinds[row.rebuild]["schema"],
            }
    for key, reason in retired:
        properties[key] = {
            "description": f"Retired, read and dropped: {reason}",
            "deprecated": True,
        }
    return properties


def schema_context(env: jinja2.Environment, table: Table) -> dict[str, Any]:
    """What codegen_meta.schema.json.j2 and fields.md.j2 render from."""
    kinds = kind_schemas(env, table)

    def retired(group: str) -> list[tuple[str, str]]:
        return [(gone.key, gone.reason) for gone in table.retired if gone.group == group]

    rule = {
        MATCH_KEY: {"description": "The FQN of the module the rule applies to.", "type": "string"}
    }
    return {
        "schema_id": SCHEMA_ID,
        "placement_pattern": PLACEMENT_PATTERN,
        "target_pattern": f"^{DOTTED_PATH_PATTERN}$",
        "entry_properties": _properties(table.group(PARAM_PLAN), retired(PARAM_PLAN), kinds),
        "rule_properties": {
            **rule,
            **_properties(table.group(INJECTIONS), retired(INJECTIONS), kinds),
        },
        "kind_shows": {kind: fragment["shows"] for kind, fragment in kinds.items()},
    }
