"""Folding names that differ only by a number: ``model.layers.[0-31].mlp``.

An item is ``(head, name, tail)``: its text is the three joined, and only ``name``, a
dotted module or parameter name, is folded. Items whose texts differ only in one number
segment of the name become one, the numbers written as ranges: ``0-31`` (consecutive),
``0-28/4`` (every fourth, as cron writes a step), ``3,7`` (the rest). Numbers are folded
from the rightmost segment to the leftmost, so ``layers.[0-1].experts.[0-7].w`` is one
item when every layer holds the same experts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable
from typing import TypeVar

Item = tuple[str, str, str]
# A name as segments: text, or the set of numbers a folded segment stands for.
Segments = tuple[str | frozenset[int], ...]
T = TypeVar("T", bound=Hashable)


def _number(segment: str) -> bool:
    # Only a number written as Python writes it folds back to the same text.
    found = _NUMBERS.get(segment)
    if found is None:
        found = _NUMBERS[segment] = (
            segment.isascii() and segment.isdigit() and (segment == "0" or segment[0] != "0")
        )
    return found


_NUMBERS: dict[str, bool] = {}  # a plan's segments are few: each is looked at once


def ranges(numbers: Iterable[int]) -> str:
    """Distinct ``numbers`` as sorted ranges: ``0-31``, ``0-28/4``, ``1-3,5-7``, ``3,7``."""
    xs = sorted(numbers)
    if len(xs) > 2 and (xs[-1] - xs[0]) % (len(xs) - 1) == 0:  # one progression, at once
        step = (xs[-1] - xs[0]) // (len(xs) - 1)
        if step and xs == list(range(xs[0], xs[-1] + 1, step)):
            return f"{xs[0]}-{xs[-1]}" + (f"/{step}" if step > 1 else "")
    parts: list[str] = []
    i, n = 0, len(xs)
    while i < n:
        if i + 1 < n:
            step = xs[i + 1] - xs[i]
            j = i + 1
            while j + 1 < n and xs[j + 1] - xs[j] == step:
                j += 1
            if step == 1 or j - i >= 2:  # a consecutive pair, or three or more
                parts.append(f"{xs[i]}-{xs[j]}" + (f"/{step}" if step > 1 else ""))
                i = j + 1
                continue
        parts.append(str(xs[i]))
        i += 1
    return ",".join(parts)


def segment_text(segment: str | frozenset[int]) -> str:
    """A segment as shown: text as it is, a set of one number as that number, else
    ``[ranges]``."""
    if isinstance(segment, str):
        return segment
    if len(segment) == 1:
        return str(next(iter(segment)))
    return _ranges_text(segment)


@functools.lru_cache(maxsize=1024)
def _ranges_text(numbers: frozenset[int]) -> str:
    # A folded layer's set stands in each of its lines' names: written once.
    return f"[{ranges(numbers)}]"


def name_text(segments: Segments) -> str:
    """A folded name as shown."""
    return ".".join(map(segment_text, segments))


def fold_keyed(names: Iterable[tuple[str | Segments, T]]) -> list[tuple[Segments, T]]:
    """``(name, key)`` pairs with the names that differ only by a number and share a key
    folded into one; the number segments are sets. Rightmost numbers first."""
    done: list[tuple[Segments, T]] = []
    work: list[tuple[Segments, int, T]] = []
    # The first fold of a plain name, on its text (_last_number).
    first: dict[tuple[str | None, str, T], set[int]] = {}
    for name, key in names:
        if not isinstance(name, str):
            work.append((name, -1, key))
            continue
        found = _last_number(name)
        if found is None:
            done.append((tuple(name.split(".")), key))
            continue
        before, number, after = found
        group = first.get((before, after, key))
        if group is None:
            first[before, after, key] = {int(number)}
        else:
            group.add(int(number))
    for (before, after, key), found_numbers in first.items():
        head = tuple(before.split(".")) if before is not None else ()
        tail = tuple(after[1:].split(".")) if after else ()
        work.append((head + (frozenset(found_numbers),) + tail, len(head), key))
    while work:
        groups: dict[tuple[Segments, int, T], list[str | frozenset[int]]] = {}
        for segments, end, key in work:
            place = _rightmost_number(segments, end)
            if place < 0:
                done.append((segments, key))
                continue
            template = segments[:place] + ("",) + segments[place + 1 :]
            members = groups.get((template, place, key))
            if members is None:
                groups[template, place, key] = [segments[place]]
            else:
                members.append(segments[place])
        work = [
            (template[:place] + (_together(members),) + template[place + 1 :], place, key)
            for (template, place, key), members in groups.items()
        ]
    return done


def _together(segments: list[str | frozenset[int]]) -> frozenset[int]:
    """The numbers of the segments, as one set (a set alone as it is: a layer's numbers,
    which every module of the layer holds, are not copied for each)."""
    if len(segments) == 1 and not isinstance(segments[0], str):
        return segments[0]
    return frozenset().union(*({int(s)} if isinstance(s, str) else s for s in segments))


# A name's rightmost number segment: what is before it, the number, what is after it.
_LAST_NUMBER = re.compile(r"(?:(.*)\.)?(0|[1-9][0-9]*)((?:\..*)?)$", re.S)


def _last_number(name: str) -> tuple[str | None, str, str] | None:
    """``_LAST_NUMBER``'s groups for ``name``, or None where it has no number segment."""
    # Most names end in a number or in one segment after it (``layers.3.mlp``): found by
    # splitting at the last dots, and only the rest by the regular expression.
    if not name.endswith("\n"):  # there ``$`` matches before the newline too: see below
        head, dot, last = name.rpartition(".")
        if _number(last):
            return (head if dot else None), last, ""
        if dot:
            before, dot, number = head.rpartition(".")
            if _number(number):
                return (before if dot else None), number, "." + last
    found = _LAST_NUMBER.match(name)
    return None if found is None else (found[1], found[2], found[3])


def _rightmost_number(segments: Segments, end: int) -> int:
    """The index of the rightmost number segment left of ``end`` (-1: anywhere); -1 if none."""
    for place in range(len(segments) - 1 if end < 0 else end - 1, -1, -1):
        segment = segments[place]
        if not isinstance(segment, str) or _number(segment):
            return place
    return -1


def fold(items: Iterable[Item]) -> list[Item]:
    """The items with every name that differs from others only by a number folded; an item
    nothing folds with is kept. Unordered: sort with ``natural_key``."""
    keyed = fold_keyed((name, (head, tail)) for head, name, tail in items)
    return [(head, name_text(segments), tail) for segments, (head, tail) in keyed]


def natural_key(name: str) -> str:
    """Sort key of a (folded) dotted name: numbers by value (``layers.2`` before
    ``layers.10``; ``[0-31]`` by its first number), the rest as text."""
    # No number spans a dot, so the key is made segment by segment, and a plan repeats its
    # segments (a layer's number in each of its modules): each one's key is made once
    # (_SegmentKeys, which holds every segment keyed in the process), the rest in C.
    return ".".join(map(_SEGMENT_KEYS.__getitem__, name.split(".")))


def natural_sorted(names: Iterable[str]) -> list[str]:
    """``names`` sorted by ``natural_key``; names whose keys tie (``07``, ``7``) by their
    text."""
    names = list(names)
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1:  # a newline in a name (or no names)
        return sorted(names, key=lambda name: (natural_key(name), name))
    # Every key at once, in C: a segment made of one name's last and the next one's first
    # is keyed as the two are, since no number spans the newline either.
    keys = ".".join(map(_SEGMENT_KEYS.__getitem__, joined.split("."))).split("\n")
    if len(set(keys)) < len(keys):
        return [name for _, name in sorted(zip(keys, names, strict=True))]
    return [names[i] for i in sorted(range(len(names)), key=keys.__getitem__)]


class _SegmentKeys(dict[str, str]):
    """The natural key of each segment, made when first asked for."""

    def __missing__(self, segment: str) -> str:
        key = self[segment] = _DIGITS.sub(_padded, segment)
        return key


_SEGMENT_KEYS = _SegmentKeys()
_DIGITS = re.compile(r"\[?([0-9]+)")


def _padded(found: re.Match[str]) -> str:
    return found[1].zfill(20)
