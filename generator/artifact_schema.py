"""The facts the artifact's schema and field reference are rendered from: each table's
rows, each rebuild record's schema fragment, the format's grammars. No torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kinds import KindFacts
from .table import DERIVED, Table

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing

# JSON Schema's type names -> the exact Python types json.loads gives for them.
_PYTHON_TYPES = {
    "object": "dict",
    "array": "list",
    "string": "str",
    "boolean": "bool",
    "integer": "int",
    "number": "int, float",
    "null": "type(None)",
}

# What a key written only when truthy never holds: strict rebuild refuses these values.
_FALSY = {"not": {"enum": [False, 0, "", [], {}]}}


def _json_types(schema: dict[str, Any]) -> list[str]:
    """The JSON type names a schema's "type" gives: one, or a list."""
    found = schema["type"]
    return [found] if isinstance(found, str) else list(found)


def _property(table: Table, row: Any, key: str) -> dict[str, Any]:
    """The JSON Schema strict rebuild accepts under ``key`` (the row's, or an older name):
    null where it reads one; no value freeze would not write."""
    crossing = table.crossing_of(row)
    schema = dict(crossing.rebuild_record.schema)
    null = crossing.writes_null or table.roles[row.group] == DERIVED
    if null and "type" in schema:
        schema["type"] = [*_json_types(schema), "null"]
    elif null:
        schema = {"anyOf": [schema, {"type": "null"}]}
    if key == row.key:
        schema = {"title": key, "description": row.doc, **schema}
    else:
        doc = f"Older name of {row.key!r}, still read: {row.doc}"
        schema = {"title": key, "description": doc, "deprecated": True, **schema}
    if crossing.written == "truthy":
        schema["allOf"] = [_FALSY]
    elif crossing.written == "not default" and crossing.absent_parsed is not None:
        schema["allOf"] = [{"not": {"const": crossing.absent_value()}}]
    return schema


def _properties(table: Table, group: str = "", container: str = "") -> dict[str, Any]:
    """The properties of the keys in ``container`` ("": the top level, of ``group``'s rows):
    each row's own key, then the older names, then the retired keys."""
    rows = [row for row in table.keyed if row.group == group or not group]
    places = [(row, row.key, row.within, row.leaf) for row in rows]
    for row in rows:
        places += [(row, old, *at) for old, at in zip(row.aliases, row.alias_places, strict=True)]
    props = {
        leaf: _property(table, row, key) for row, key, within, leaf in places if within == container
    }
    for gone in table.retired:
        if gone.within == container and (gone.group == group or not group):
            reason = f"Retired, read and dropped: {gone.reason}"
            props[gone.leaf] = {"description": reason, "deprecated": True}
    return props


def _python_types(crossing: Crossing, none_too: bool = False) -> str:
    """The exact Python types (a tuple expression; null too with ``none_too``) CodegenMeta
    admits for a top-level value of the row's crossing; "" where no JSON type is named."""
    schema = crossing.rebuild_record.schema
    alternatives = schema.get("anyOf", [schema])
    if not all("type" in alternative for alternative in alternatives):
        return ""
    names = [name for alternative in alternatives for name in _json_types(alternative)]
    types = ", ".join(dict.fromkeys(_PYTHON_TYPES[name] for name in names + ["null"] * none_too))
    return f"({types},)" if "," not in types else f"({types})"


def schema_globals(kinds: KindFacts) -> dict[str, Any]:
    """What codegen_meta.schema.json.j2 and fields.md.j2 read, by name."""
    return {
        "kind_names": kinds.names,
        "kind_records": kinds.records,
        # What rebuild calls for a record: a derived key's record only checks.
        "rebuild_function": lambda r: (
            f"rebuild_{r}" if f"rebuild_{r}" in kinds.defined else f"check_{r}"
        ),
        "python_types": _python_types,
        "schema_properties": _properties,
    }
