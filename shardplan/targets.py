"""Targets: module-level callables named by import path, carrying configuration (SPEC §7).

A Target freezes to ``{"_target_": path, **kwargs}``. Resolution (the import) is lazy,
so rebuilding an artifact never imports user code.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from shardplan.errors import FreezeError, MetaError, key_path

TARGET_KEY = "_target_"
_DOTTED_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


class Target:
    """A callable named by its dotted import path, plus keyword configuration.

    Calling a Target imports the callable on first use and calls it with the stored
    kwargs, overridden by the call's own.
    """

    __slots__ = ("path", "kwargs", "_resolved")

    def __init__(self, path: str, /, **kwargs: Any) -> None:
        if not isinstance(path, str) or not _DOTTED_PATH_RE.fullmatch(path):
            raise ValueError(
                f"Target path {path!r} must be a dotted import path such as 'package.module.function'"
            )
        if TARGET_KEY in kwargs:
            # to_dict would let this kwarg overwrite the path: the Target would come back
            # naming a different callable.
            raise ValueError(f"Target {path!r}: {TARGET_KEY!r} is reserved and cannot be a kwarg")
        self.path = path
        self.kwargs = kwargs
        self._resolved: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        """Import and return the callable (once; later calls reuse it)."""
        if self._resolved is None:
            self._resolved = _import_path(self.path)
        return self._resolved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **{**self.kwargs, **kwargs})

    def to_dict(self) -> dict[str, Any]:
        """The frozen form: ``{"_target_": path, **kwargs}``."""
        return {TARGET_KEY: self.path, **self.kwargs}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        """Build from the frozen form; the callable is not imported."""
        if TARGET_KEY not in data:
            raise ValueError(f"a frozen Target needs a {TARGET_KEY!r} key; got keys {sorted(data)}")
        fields = dict(data)
        return cls(fields.pop(TARGET_KEY), **fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self.path == other.path and self.kwargs == other.kwargs

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        return f"Target({self.path!r}{extra})"


def _import_path(path: str) -> Callable[..., Any]:
    """Import ``package.module.attr.attr``: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing prefix of the path itself means "try a shorter prefix"; a
            # missing module imported by user code (even one whose name is a string
            # prefix of ours, like ``foo`` for ``foo_bar``) is the real error.
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # this prefix is not a module; try a shorter one
            raise
        for attr in parts[split:]:
            obj = getattr(obj, attr)
        return obj  # type: ignore[no-any-return]
    raise ImportError(f"cannot import Target path {path!r}: no importable module prefix")


def target_of_callable(fn: Callable[..., Any], path: str) -> Target:
    """The Target naming a plain callable, or FreezeError if it cannot be re-imported.

    Lambdas, local functions, bound methods and anything defined in ``__main__`` would
    come back as a name that does not import; nothing is silently turned into one.
    """
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise FreezeError(path, f"{fn!r} has no __module__/__qualname__; wrap it in a Target")
    dotted = f"{module}.{qualname}"
    if module == "__main__" or "<" in qualname:
        raise FreezeError(
            path,
            f"{dotted} cannot be re-imported by a trainer; move it to module level in an "
            "importable module, or pass a Target",
        )
    owner: Any = sys.modules.get(module)
    found: Any = owner
    for attr in qualname.split("."):
        found = getattr(found, attr, None)
    if owner is None or found is not fn:
        raise FreezeError(
            path,
            f"{dotted} does not import back to {fn!r}; pass a Target naming a module-level callable",
        )
    return Target(dotted)


def check_json_value(value: object, path: str) -> None:
    """Refuse a Target kwarg that JSON would not give back unchanged."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if math.isfinite(value):
            return
        raise FreezeError(path, f"{value!r} is not a finite number and has no JSON form")
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json_value(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise FreezeError(path, f"key {key!r} must be a str to cross JSON")
            check_json_value(item, key_path(path, key))
        return
    hint = "; use a list" if isinstance(value, tuple) else ""
    raise FreezeError(path, f"{value!r} ({type(value).__name__}) does not survive JSON{hint}")


def target_from_frozen(data: dict[str, Any], path: str) -> Target:
    """Rebuild a Target from ``{"_target_": path, **kwargs}`` or raise MetaError."""
    dotted = data[TARGET_KEY]
    if not isinstance(dotted, str) or not _DOTTED_PATH_RE.fullmatch(dotted):
        raise MetaError(
            key_path(path, TARGET_KEY),
            f"expected a dotted import path such as 'pkg.mod.fn', got {dotted!r}",
        )
    return Target.from_dict(data)
