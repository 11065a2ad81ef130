"""Errors of the artifact boundary and of applying a plan. Each names the place in the data
it refers to."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for a message: shortened, and never raising (an int too long for
    text, a broken ``__repr__``), so reporting a bad value cannot fail in its own way."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def described(value: object) -> str:
    """``int 3``, ``tuple ('a', 'b')``: a value's type and its shortened repr."""
    return f"{type(value).__name__} {shown(value)}"


def key_path(base: str, key: object) -> str:
    """``base["key"]``: the path of a mapping key, quoted as JSON quotes it.

    A key that is not a str (only a meta or plan built in Python can hold one) is shown
    as Python shows it, ``base[3]``, so the message still names the place.
    """
    if not isinstance(key, str):
        return f"{base}[{shown(key)}]"
    if key.isascii() and key.isprintable() and '"' not in key and "\\" not in key:
        return f'{base}["{key}"]'  # what json.dumps gives, without its cost
    return f"{base}[{json.dumps(key)}]"


def field_path(base: str, key: object) -> str:
    """``base.key`` for an identifier key, else ``base["key"]``."""
    return f"{base}.{key}" if isinstance(key, str) and key.isidentifier() else key_path(base, key)


def json_type(value: object) -> str:
    """The JSON name of a value's type, for error messages.

    A value that JSON cannot hold (a tuple, a set, any other object) can only come from
    a meta built in Python: its Python type is named instead, so a tuple is never
    reported as "array".
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return f"Python {type(value).__name__}"


def check_argument(
    value: object,
    kind: type | tuple[type, ...],
    expected: str,
    error: Callable[[str, str], ValueError],
    name: str = "",
) -> None:
    """Refuse an argument of the wrong type with the public function's own error (MetaError
    or FreezeError), naming it: ``strict: expected a bool, got str 'no'``; ``name`` is
    left out for the main argument (``expected a CodegenMeta, got str 'nope'``)."""
    if not isinstance(value, kind):
        raise error("", f"{name + ': ' if name else ''}expected {expected}, got {described(value)}")


class PlanError(ValueError):
    """A value that cannot cross the artifact boundary: ``path`` names its place and
    ``message`` says why and what to do (``str()`` is both). MetaError and FreezeError are
    its two directions, so a caller can catch either or both."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class MetaError(PlanError):
    """A codegen_meta artifact (or a CodegenMeta) that cannot be rebuilt.

    ``path`` names the place, e.g. ``param_plan["model.mlp"].params["gate.weight"]["tp"]``.
    """


class FreezeError(PlanError):
    """A live plan value that cannot be frozen into JSON that rebuilds to it.

    ``path`` names the place in the plan, e.g. ``modules["lm_head"].params["weight"]["tp"]``.
    """


@dataclass(frozen=True)
class Finding:
    """One way the plan does not fit: where (a module, parameter or plan key) and what."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class ApplyError(ValueError):
    """The plan does not fit the model or the mesh; the message names the place.

    ``findings`` holds ``check_fit``'s findings when it was the one to refuse. Defined here,
    beside the other errors, so that catching it imports no torch.
    """

    def __init__(self, message: str, findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.findings = list(findings or [])


class ArtifactWriteError(OSError):
    """codegen_meta.json could not be written; the message names the target file.

    An ``OSError``, so callers that handle file errors keep working; the target is left
    as it was and no temporary file remains. ``errno`` is the cause's, ``filename`` the
    target's.
    """

    def __str__(self) -> str:
        return str(self.strerror)


class UntrustedTarget(MetaError):
    """A Target the calling program did not allow, or one no program may allow
    (docs/contract.md §8).

    Raised at rebuild, before anything is imported, or when the Target is first resolved
    (its callable really lives outside the allowed prefixes), before anything is called.
    ``path`` names the place in the artifact, ``target`` the dotted path it names and
    ``real_name`` (at resolution) where the imported object really lives.
    """

    def __init__(self, path: str, message: str, *, target: str, real_name: str = "") -> None:
        super().__init__(path, message)
        self.target = target
        self.real_name = real_name
