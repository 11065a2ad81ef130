"""Errors of the artifact boundary. Both name the place in the data they refer to."""

from __future__ import annotations

import json


def key_path(base: str, key: str) -> str:
    """``base["key"]``: the path of a mapping key, quoted as JSON quotes it."""
    if key.isascii() and key.isprintable() and '"' not in key and "\\" not in key:
        return f'{base}["{key}"]'  # what json.dumps gives, without its cost
    return f"{base}[{json.dumps(key)}]"


def field_path(base: str, key: str) -> str:
    """``base.key`` for an identifier key, else ``base["key"]``."""
    return f"{base}.{key}" if key.isidentifier() else key_path(base, key)


def json_type(value: object) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class MetaError(ValueError):
    """A codegen_meta artifact (or a CodegenMeta) that cannot be rebuilt.

    ``path`` names the place, e.g. ``param_plan["model.mlp"].params["gate.weight"]["tp"]``.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class FreezeError(ValueError):
    """A live plan value that cannot be frozen into JSON that rebuilds to it.

    ``path`` names the place in the plan, e.g. ``modules["lm_head"].params["weight"]["tp"]``.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message
