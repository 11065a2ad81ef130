"""Folding names that differ only by a number: ``model.layers.[0-31].mlp``.

An item is ``(head, name, tail)``: its text is the three joined, and only ``name``, a
dotted module or parameter name, is folded. Items whose texts differ only in one number
segment of the name become one, the numbers written as ranges: ``0-31`` (consecutive),
``0-28/4`` (every fourth, as cron writes a step), ``3,7`` (the rest). Numbers are folded
from the rightmost segment to the leftmost, so ``layers.[0-1].experts.[0-7].w`` is one
item when every layer holds the same experts.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar, Union

Item = tuple[str, str, str]
# A name as segments: text, or the set of numbers a folded segment stands for.
Segments = tuple[Union[str, frozenset[int]], ...]
T = TypeVar("T", bound=Hashable)


def _number(segment: str) -> bool:
    # Only a number written as Python writes it folds back to the same text.
    return segment.isascii() and segment.isdigit() and (segment == "0" or segment[0] != "0")


def ranges(numbers: Iterable[int]) -> str:
    """Distinct ``numbers`` as sorted ranges: ``0-31``, ``0-28/4``, ``1-3,5-7``, ``3,7``."""
    xs = sorted(numbers)
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
    return f"[{ranges(segment)}]"


def name_text(segments: Segments) -> str:
    """A folded name as shown."""
    return ".".join(map(segment_text, segments))


def fold_keyed(names: Iterable[tuple[Segments, T]]) -> list[tuple[Segments, T]]:
    """``(name, key)`` pairs with the names that differ only by a number and share a key
    folded into one; the number segments are sets. Rightmost numbers first."""
    work = [(segments, -1, key) for segments, key in names]
    done: list[tuple[Segments, T]] = []
    while work:
        groups: dict[tuple[Segments, int, T], set[int]] = {}
        for segments, end, key in work:
            place = _rightmost_number(segments, end)
            if place < 0:
                done.append((segments, key))
                continue
            segment = segments[place]
            numbers = {int(segment)} if isinstance(segment, str) else segment
            template = segments[:place] + ("",) + segments[place + 1 :]
            group = groups.get((template, place, key))
            if group is None:
                groups[template, place, key] = set(numbers)
            else:
                group.update(numbers)
        work = [
            (template[:place] + (frozenset(numbers),) + template[place + 1 :], place, key)
            for (template, place, key), numbers in groups.items()
        ]
    return done


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
    keyed = fold_keyed((tuple(name.split(".")), (head, tail)) for head, name, tail in items)
    return [(head, name_text(segments), tail) for segments, (head, tail) in keyed]


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key of a (folded) dotted name: numbers by value (``layers.2`` before
    ``layers.10``, ``[0-31]`` by its first number), other segments as text."""
    key = []
    for segment in name.split("."):
        if segment.isdigit():
            key.append((0, int(segment), segment))
        elif segment[:2].startswith("[") and segment[1:2].isdigit():
            first = segment[1:].split(",")[0].split("-")[0].rstrip("]")
            key.append((0, int(first), segment))
        else:
            key.append((1, 0, segment))
    return tuple(key)
