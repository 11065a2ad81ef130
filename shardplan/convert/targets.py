"""Targets: module-level callables named by import path, carrying configuration
(docs/contract.md §8).

A Target freezes to ``{"_target_": path, **kwargs}``. Resolution (the import) is lazy,
so rebuilding an artifact never imports user code. A Target rebuilt from an artifact is
admitted only under the calling program's allow-list, and checked again against it when
first resolved (shardplan.convert.trust); one built in Python is trusted code.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from typing import Any

from shardplan.convert import trust
from shardplan.convert.json_values import TooDeep, copied_json, json_copy, raise_if_unwritable
from shardplan.errors import FreezeError, MetaError, field_path, key_path, shown
from shardplan.table.format import DOTTED_PATH_PATTERN, TARGET_KEY

_DOTTED_PATH_RE = re.compile(DOTTED_PATH_PATTERN)


class Target:
    """A callable named by its dotted import path, plus keyword configuration.

    Calling a Target imports the callable on first use and calls it with the stored
    kwargs, overridden by the call's own. A Target rebuilt from an artifact remembers the
    allow-list it was admitted under and its place in the artifact (``_allowed``,
    ``_place``); one built in Python has no allow-list (None) and resolves unchecked.
    Neither takes part in equality, hashing or ``to_dict``.
    """

    __slots__ = ("path", "kwargs", "_resolved", "_allowed", "_place")

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
        self._allowed: trust.AllowList | None = None
        self._place = ""

    def resolve(self) -> Callable[..., Any]:
        """Import and return the callable (once; later calls reuse it).

        A Target rebuilt from an artifact is resolved under the allow-list it was admitted
        by (trust.resolve: its path is checked again, it steps only through plain modules
        and classes, and what it reaches must be trusted by its real name):
        UntrustedTarget, and nothing is called, if it is not. One bound to the program's
        own callable was resolved at rebuild.
        """
        if self._resolved is None:
            allowed = self._allowed
            if allowed is None:
                self._resolved = _import_path(self.path)
            else:
                self._resolved = trust.resolve(self.path, allowed, self._place)
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
    """Import ``package.module.attr.attr``: the longest importable module prefix, then
    attributes (a Target built in Python: trusted code)."""
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
        raise FreezeError(path, f"{shown(fn)} has no __module__/__qualname__; wrap it in a Target")
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
            f"{dotted} does not import back to {shown(fn)}; pass a Target naming a module-level callable",
        )
    try:
        return Target(dotted)
    except ValueError:
        raise FreezeError(
            path,
            f"{dotted} is not a dotted import path; pass a Target naming a module-level callable",
        ) from None


def check_json_value(value: object, path: str) -> None:
    """Refuse (FreezeError at the exact place) a value JSON would not give back unchanged:
    a tuple, a set, a non-str key, a non-finite float, an int too long for text, a cycle,
    nesting deeper than ``json_values.MAX_DEPTH``, any other object."""
    raise_if_unwritable(value, path, FreezeError, allow_tuples=False)


# Target paths frozen once and found valid: planners name a few callables from thousands
# of modules, so each path's pattern and bounds are checked once. Bounded, as every cache
# an input can grow.
_VALID_PATHS: set[str] = set()
_VALID_PATHS_LIMIT = 4096
# The kwarg values frozen as they stand, immutable and always JSON: str, bool, None, and
# ints within 64 bits (always text Python reads back). Anything else takes the full check.
_PLAIN_KWARG_TYPES = (str, bool, type(None))
_PLAIN_INT_BOUND = 1 << 63


def frozen_target(target: Target, path: str) -> dict[str, Any]:
    """``target.to_dict()``, checked to rebuild to an equal Target.

    A Target's attributes can be reassigned after construction, so the path and kwargs
    are checked again here: rebuild would refuse what they could have become.
    """
    dotted = target.path
    if type(dotted) is not str or dotted not in _VALID_PATHS:
        _check_target_path(dotted, path)
    kwargs = target.kwargs
    if not isinstance(kwargs, dict):
        raise FreezeError(path, f"Target kwargs must be a dict, got {type(kwargs).__name__}")
    if TARGET_KEY in kwargs:
        raise FreezeError(path, f"{TARGET_KEY!r} is reserved and cannot be a Target kwarg")
    # Copied: the meta shares no container with the live plan (mutating one after freeze
    # leaves the other as it was). Checked in kwarg order, so the first bad one is named.
    frozen: dict[str, Any] = {TARGET_KEY: dotted}
    for name, arg in kwargs.items():
        kind = type(arg)
        if type(name) is str and (
            kind in _PLAIN_KWARG_TYPES
            or (kind is int and -_PLAIN_INT_BOUND < arg < _PLAIN_INT_BOUND)
        ):
            frozen[name] = arg
            continue
        if not isinstance(name, str):
            raise FreezeError(path, f"Target kwarg name {shown(name)} must be a str")
        check_json_value(arg, field_path(path, name))
        frozen[name] = json_copy(arg)
    return frozen


def _check_target_path(dotted: object, path: str) -> None:
    """FreezeError unless ``dotted`` is a dotted import path within the bounds rebuild takes;
    a valid one is remembered."""
    if not isinstance(dotted, str) or not _DOTTED_PATH_RE.fullmatch(dotted):
        raise FreezeError(
            path,
            f"Target path {shown(dotted)} must be a dotted import path such as 'pkg.mod.fn'",
        )
    too_long = trust.path_bound(dotted)
    if too_long is not None:
        raise FreezeError(path, too_long + ": no rebuild would accept it")
    if type(dotted) is str and len(_VALID_PATHS) < _VALID_PATHS_LIMIT:
        _VALID_PATHS.add(dotted)


# JSON values a Target's kwargs hold as they stand: immutable, nothing to copy.
_IMMUTABLE_JSON = (str, int, float, bool, type(None))


def _refuse_key_not_str(data: dict[str, Any], path: str) -> None:
    """JSON keys are strings; a meta built in Python may hold others, which ** refuses."""
    for key in data:
        if not isinstance(key, str):
            raise MetaError(key_path(path, key), f"object key {shown(key)} must be a string")


def target_from_frozen(data: dict[str, Any], path: str, targets: trust.Admission) -> Target:
    """Rebuild a Target from ``{"_target_": path, **kwargs}`` or raise MetaError.

    Its path must be admitted by ``targets``, what the rebuild's caller allowed
    (trust.admission): else UntrustedTarget (a MetaError) at ``path``, before anything
    is imported. The Target keeps that allow-list for its first call. Nested
    ``{"_target_": ...}`` objects in its kwargs stay plain data.
    """
    dotted = data[TARGET_KEY]
    allowed = targets.allowed
    # A path this rebuild admitted was checked then (its form, then the allow-list): an
    # artifact names the same few callables thousands of times.
    if type(dotted) is not str or dotted not in targets.admitted:
        if not isinstance(dotted, str) or not _DOTTED_PATH_RE.fullmatch(dotted):
            raise MetaError(
                key_path(path, TARGET_KEY),
                f"expected a dotted import path such as 'pkg.mod.fn', got {shown(dotted)}",
            )
        _refuse_key_not_str(data, path)  # before the allow-list, which names the path
        if allowed is not None:  # None: freeze reading back the planner's own (READ_BACK)
            trust.check_path(dotted, allowed, path)
            targets.admitted.add(dotted)
    # The kwargs are copied (no container shared with the meta or another rebuild), and
    # nest no deeper than freeze writes; a kwarg's path is built only for its error.
    kwargs: dict[str, Any] = {}
    try:
        for key, value in data.items():
            if key != TARGET_KEY:
                if type(key) is not str:
                    _refuse_key_not_str(data, path)
                kwargs[key] = value if type(value) in _IMMUTABLE_JSON else json_copy(value)
    except TooDeep:
        _refuse_key_not_str(data, path)  # a key no string is named first, as for a new path
        for key, value in data.items():
            if key != TARGET_KEY:
                copied_json(value, field_path(path, key))  # raises, naming the first
        raise  # not reached: a value too deep above is too deep here
    # The path was checked above, and TARGET_KEY is not among the kwargs: built as
    # Target(dotted, **kwargs) would build it, without checking the path a second time.
    target = Target.__new__(Target)
    target.path = dotted
    target.kwargs = kwargs
    target._resolved = None
    target._allowed = allowed
    target._place = path
    if allowed is not None and allowed.bound:
        # Bound to the program's own callable: a call reaches it, nothing is imported.
        target._resolved = allowed.bound.get(dotted)
    return target
