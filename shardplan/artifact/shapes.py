"""The JSON type checks CodegenMeta's generated ``check_meta`` makes, field by field.

No torch, no table: the generated module names each field and its types; this module only
says how a misfit reads.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any, Final

from shardplan.errors import MetaError, json_type, key_path, shown


class Unset(enum.Enum):
    """The type of ``UNSET``: a CodegenMeta field whose key the document does not hold."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


# A top-level key the document does not hold, as msgspec's UNSET: told apart from a key
# holding null or a default, so loading then dumping never invents a key, and a row added
# after an artifact was written reads that artifact's key as absent.
UNSET: Final = Unset.UNSET

_JSON_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def expect_json(
    value: object, types: tuple[type, ...], path: str, named: tuple[type, ...] = ()
) -> None:
    """Refuse a value whose type is not exactly one of ``types`` (a tuple is not an array,
    a bool is not a number): MetaError at ``path``, naming ``named`` (default: ``types``)
    as what was expected."""
    if type(value) not in types:
        # An integer is a number: where both are admitted, "a number" says it.
        named = tuple(t for t in named or types if not (t is int and float in types))
        expected = " or ".join(dict.fromkeys(_JSON_NAMES[t] for t in named))
        raise MetaError(path, f"expected {expected}, got {json_type(value)}")


def expect_str_keys(obj: dict[Any, Any], path: str) -> None:
    """Refuse a key that is not a str: JSON keys are strings, and json.dumps would silently
    turn another key into one."""
    for key in obj:
        if not isinstance(key, str):
            raise MetaError(key_path(path, key), f"object key {shown(key)} must be a string")


def refuse_known_keys(extra: dict[str, Any], known: Collection[str]) -> None:
    """Refuse a CodegenMeta field's key in ``extra``: it would be written twice."""
    clashing = sorted(set(extra) & set(known))
    if clashing:
        raise MetaError("extra", f"keys {clashing} are CodegenMeta fields; set the fields instead")
