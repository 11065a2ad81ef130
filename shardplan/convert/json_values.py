"""Which Python values JSON writes and reads back, and where a value fails that.

Freeze uses it to refuse a plan value that would not come back (FreezeError), the
artifact writer to name the place of a value JSON cannot write (MetaError). Both need
the same walk, with the same limits, so it lives here once. No torch import.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from shardplan.errors import FreezeError, MetaError, described, key_path, shown

# Deepest nesting the writer accepts, and so the reader too (what load_meta takes in,
# dump_meta writes again): what the standard library's decoder reads back well within the
# interpreter's recursion limit. Frozen values nest far less (MAX_DEPTH).
MAX_DOCUMENT_DEPTH = 500

# Deepest nesting a value may have. The standard library's decoder recurses once a
# level and stops near the interpreter's recursion limit (1000), and fast codecs stop
# far earlier (orjson: 255), so an artifact stays readable everywhere with this bound.
MAX_DEPTH = 64
Problem = tuple[str, str]  # (path, what is wrong there)


def _int_problem(value: int) -> str | None:
    # Python refuses to turn an int of more digits than its limit into text, or text
    # back into one. bit_length is cheap; only ints near the limit pay for the test.
    limit = sys.get_int_max_str_digits()
    if limit and value.bit_length() > 3.3 * limit - 10:
        try:
            str(value)
        except ValueError:
            return f"an int of more than {limit} digits has no JSON form Python reads back"
    return None


def find_unwritable(
    value: object, path: str, *, allow_tuples: bool, max_depth: int = MAX_DEPTH
) -> Problem | None:
    """The first place under ``value`` that JSON cannot carry, or None.

    JSON carries None, bool, int, finite float, str, list and dict with str keys.
    ``allow_tuples``: a tuple is written as an array (the artifact writer allows it, since
    the bytes are what they would be for a list); freeze refuses it, because it would
    come back as a list. Self-reference and nesting deeper than ``max_depth`` are refused
    by name, never by a RecursionError.
    """
    active: set[int] = set()  # containers on the current path: a repeat is a cycle

    def walk(node: object, where: str, depth: int) -> Problem | None:
        if node is None or isinstance(node, (bool, str)):
            return None
        if isinstance(node, int):
            problem = _int_problem(node)
            return (where, problem) if problem else None
        if isinstance(node, float):
            if math.isfinite(node):
                return None
            return where, f"{shown(node)} is not a finite number and has no JSON form"
        is_list = isinstance(node, list) or (allow_tuples and isinstance(node, tuple))
        if not is_list and not isinstance(node, dict):
            hint = "; use a list" if isinstance(node, tuple) else ""
            return where, f"{shown(node)} ({type(node).__name__}) has no JSON form{hint}"
        if id(node) in active:
            return where, "the value contains itself; JSON cannot write a cycle"
        if depth >= max_depth:  # named at the top: a path 64 levels long says nothing more
            return path, f"the value nests deeper than {max_depth} levels"
        active.add(id(node))
        try:
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str):
                        return where, f"key {shown(key)} ({type(key).__name__}) must be a str"
                    found = walk(item, key_path(where, key), depth + 1)
                    if found:
                        return found
            else:
                assert isinstance(node, (list, tuple))
                for index, item in enumerate(node):
                    found = walk(item, f"{where}[{index}]", depth + 1)
                    if found:
                        return found
            return None
        finally:
            active.discard(id(node))

    return walk(value, path, 0)


def raise_if_unwritable(
    value: object,
    path: str,
    error: Callable[[str, str], Exception],
    *,
    allow_tuples: bool,
    max_depth: int = MAX_DEPTH,
) -> None:
    """Raise ``error(path, message)`` at the first place JSON cannot carry."""
    found = find_unwritable(value, path, allow_tuples=allow_tuples, max_depth=max_depth)
    if found:
        raise error(*found)


def frozen_strings(value: object, path: str, what: str = "str") -> list[str]:
    """A list or tuple of str as the list JSON writes; FreezeError at the first misfit.

    A str is refused though iterable: list("abc") would silently become ["a", "b", "c"].
    """
    if not isinstance(value, (list, tuple)):
        raise FreezeError(path, f"expected a list or tuple of {what}, got {described(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise FreezeError(f"{path}[{index}]", f"expected a str, got {described(item)}")
    return list(value)


class TooDeep(ValueError):
    """A value nests deeper than ``json_copy`` follows (a cycle, built in Python, does)."""


def json_copy(value: Any, depth: int = MAX_DEPTH) -> Any:
    """A copy of a JSON value that shares no container with it (dicts and lists copied
    all the way down; scalars are immutable). TooDeep for a value whose containers nest
    ``depth`` levels or more: the bound find_unwritable puts on what freeze writes, so what
    rebuild copies, freeze writes again."""
    kind = type(value)
    if kind is dict or kind is list:
        if depth == 0:
            raise TooDeep(f"nests deeper than {MAX_DEPTH} levels")
        if kind is dict:
            return {key: json_copy(item, depth - 1) for key, item in value.items()}
        return [json_copy(item, depth - 1) for item in value]
    return value


def copied_json(value: Any, path: str) -> Any:
    """``json_copy(value)`` for rebuild: a value nested deeper than freeze writes is a
    MetaError at ``path`` (a document a reader takes in can nest that deep)."""
    try:
        return json_copy(value)
    except TooDeep as exc:
        raise MetaError(path, f"the value {exc}, which freeze never writes") from None


def members_within(value: Any, levels: int) -> int | None:
    """The members of every object in ``value`` (JSON types), counted; None if a container
    in it nests more than ``levels`` deep (``value`` itself, if a container, is level 1)."""
    members = 0
    level = [value] if type(value) in (dict, list) else []
    while level:
        if levels <= 0:
            return None
        levels -= 1
        below: list[Any] = []
        for node in level:
            if type(node) is dict:
                members += len(node)
                node = node.values()
            below += [child for child in node if type(child) is dict or type(child) is list]
        level = below
    return members
