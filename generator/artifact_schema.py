"""The facts the artifact's schema and field reference are rendered from: each table's
rows, each rebuild record's schema fragment, the format's grammars. No torch."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from .kinds import KindFacts
from .table import DERIVED, Format, Table

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing

SCHEMA_ID = "https://specgen.invalid/schemas/codegen_meta.schema.json"
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


def _property(key: str, doc: str, fragment: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"title": key, "description": doc, **more, **fragment["schema"]}


def _retired(gone: Any) -> dict[str, Any]:
    return {"description": f"Retired, read and dropped: {gone.reason}", "deprecated": True}


def _fragment(table: Table, row: Any) -> dict[str, Any]:
    """The JSON Schema strict rebuild accepts for the row's key, null too where it reads one."""
    crossing = table.crossing_of(row)
    schema = dict(crossing.rebuild_record.schema)
    if crossing.writes_null or table.roles[row.group] == DERIVED:
        found = schema.get("type")
        if isinstance(found, str):
            schema["type"] = [found, "null"]
        elif isinstance(found, list):
            schema["type"] = [*found, "null"]
        else:
            schema = {"anyOf": [schema, {"type": "null"}]}
    return {"schema": schema}


def _row_property(table: Table, row: Any, key: str, doc: str, **more: Any) -> dict[str, Any]:
    """A key's schema; no falsy value where freeze writes the key only when truthy."""
    found = _property(key, doc, _fragment(table, row), **more)
    crossing = table.crossing_of(row)
    if crossing.written == "truthy":
        found = {**found, "allOf": [_FALSY]}
    elif crossing.written == "not default" and crossing.absent_parsed is not None:
        found = {**found, "allOf": [{"not": {"const": crossing.absent_value()}}]}
    return found


def _properties(table: Table, group: str) -> dict[str, Any]:
    """The JSON Schema properties of ``group``'s keys, their aliases and retired keys."""
    props: dict[str, Any] = {}
    rows = table.group(group)
    for row in rows:
        if not row.within:
            props[row.leaf] = _row_property(table, row, row.key, row.doc)
    for row in rows:
        for (within, leaf), alias in zip(row.alias_places, row.aliases, strict=True):
            if not within:
                doc = f"Older name of {row.key!r}, still read: {row.doc}"
                props[leaf] = _property(alias, doc, _fragment(table, row), deprecated=True)
    for gone in table.retired:
        if gone.group == group and not gone.within:
            props[gone.key] = _retired(gone)
    return props


def _nested_properties(table: Table, container: str) -> dict[str, Any]:
    """The properties of the keys nested in a top-level ``container`` object."""
    props: dict[str, Any] = {}
    for row in table.keyed:
        places = ((row.within, row.leaf), *row.alias_places)
        for (outer, inner), key in zip(places, (row.key, *row.aliases), strict=True):
            if outer == container:
                doc = row.doc if key == row.key else f"Older name of {row.key!r}: {row.doc}"
                extra = {} if key == row.key else {"deprecated": True}
                props[inner] = _row_property(table, row, key, doc, **extra)
    props |= {gone.leaf: _retired(gone) for gone in table.retired if gone.within == container}
    return props


def _python_types(crossing: Crossing, none_too: bool = False) -> str:
    """The exact Python types (a tuple expression; null too with ``none_too``) CodegenMeta
    admits for a top-level value of the row's crossing; "" where no JSON type is named."""
    schema = crossing.rebuild_record.schema
    alternatives = schema.get("anyOf", [schema])
    if not all("type" in alternative for alternative in alternatives):
        return ""
    names: list[str] = []
    for alternative in alternatives:
        found = alternative["type"]
        names += [found] if isinstance(found, str) else found
    if none_too:
        names.append("null")
    types = ", ".join(dict.fromkeys(_PYTHON_TYPES[name] for name in names))
    return f"({types},)" if "," not in types else f"({types})"


def _rebuild_function(defined: frozenset[str], record: str) -> str:
    """What rebuild calls for ``record``: a derived key's record only checks."""
    return f"rebuild_{record}" if f"rebuild_{record}" in defined else f"check_{record}"


def schema_globals(kinds: KindFacts, form: Format) -> dict[str, Any]:
    """What codegen_meta.schema.json.j2 and fields.md.j2 read, by name."""
    return {
        "kind_names": kinds.names,
        "kind_records": kinds.records,
        "rebuild_function": partial(_rebuild_function, kinds.defined),
        "python_types": _python_types,
        "schema_id": SCHEMA_ID,
        "placement_pattern": form.module.PLACEMENT_PATTERN,
        "target_pattern": f"^{form.module.DOTTED_PATH_PATTERN}$",
        "schema_properties": _properties,
        "nested_properties": _nested_properties,
    }
