"""Reading the two artifacts ``diff`` compares, at once.

Reading is most of ``diff``'s time, and one core's work each. Where the system can fork,
a child process reads the old file with ``read_view`` while this one reads the new, and
sends its view back with each module's entry as its JSON bytes: ``diff`` compares those
with the new entries' (encoded here while the child encodes the old ones) and decodes
only the entries that differ. Anywhere else, or if the
child cannot say, the files are read one after the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, KeysView, Mapping
from itertools import compress
from operator import ne
from pathlib import Path
from typing import Any

import msgspec

from shardplan.errors import MetaError
from shardplan.review.view import PlanView, read_view

_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode


class EncodedEntries(Mapping[str, dict[str, Any]]):
    """Module entries with each one's JSON bytes (``raw``): an entry is decoded when looked
    at, unless the decoded entries are held too (``decoded``)."""

    def __init__(
        self, raw: dict[str, bytes], decoded: Mapping[str, dict[str, Any]] | None = None
    ) -> None:
        self.raw = raw
        self.decoded = decoded

    def __getitem__(self, fqn: str) -> dict[str, Any]:
        if self.decoded is not None:
            return self.decoded[fqn]
        entry: dict[str, Any] = _DECODE(self.raw[fqn])
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __contains__(self, fqn: object) -> bool:
        return fqn in self.raw

    def keys(self) -> KeysView[str]:
        """The modules, as the dict's own view (its set operations run in C)."""
        return self.raw.keys()


def encoded(entries: Mapping[str, dict[str, Any]]) -> EncodedEntries:
    """``entries`` with each one's JSON bytes, encoded in C."""
    if isinstance(entries, EncodedEntries):
        return entries
    return EncodedEntries(dict(zip(entries, map(_ENCODE, entries.values()), strict=True)), entries)


def changed_modules(
    before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]
) -> list[str]:
    """The modules both hold whose entries differ, in ``after``'s order: by their bytes
    first where ``before`` holds bytes (then by value: keys may be in another order)."""
    if isinstance(before, EncodedEntries):
        raw, now = before.raw, encoded(after).raw
        # The modules whose bytes differ, or that ``before`` lacks, found in C.
        differ = compress(now, map(ne, map(raw.get, now), now.values()))
        return [fqn for fqn in differ if fqn in raw and before[fqn] != after[fqn]]
    return [fqn for fqn, entry in after.items() if fqn in before and before[fqn] != entry]


class UnreadFile(Exception):
    """A file of the pair that cannot be read: ``path``, and the MetaError saying why."""

    def __init__(self, path: Path, error: MetaError) -> None:
        super().__init__(str(error))
        self.path = path
        self.error = error


def _read(path: Path) -> PlanView:
    try:
        return read_view(path)
    except MetaError as exc:
        raise UnreadFile(path, exc) from None


def read_pair(old: Path, new: Path) -> tuple[PlanView, PlanView]:
    """The views of ``old`` and ``new``; UnreadFile names the first that cannot be read,
    the old file first."""
    if not hasattr(os, "fork"):
        return _read(old), _read(new)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read old, send it, and end without the parent's cleanup
        try:
            os.close(reader)
            try:
                payload = _packed(read_view(old))
            except MetaError as exc:
                payload = _PACK(["error", exc.path, exc.message])
            with os.fdopen(writer, "wb") as sink:
                sink.write(payload)
        finally:  # whatever happened: the parent reads the file itself if it heard nothing
            os._exit(0)
    os.close(writer)
    source = os.fdopen(reader, "rb")
    try:
        try:
            read = _read(new)
            # The new entries' bytes, to compare with the old ones': made while the child
            # is still encoding its own.
            read.entries = encoded(read.entries)
            new_view: PlanView | UnreadFile = read
        except UnreadFile as exc:
            new_view = exc
        received = source.read()
    finally:
        source.close()  # first: a child still writing then ends (EPIPE) instead of waiting
        os.waitpid(pid, 0)
    old_view = _unpacked(received, old)
    if isinstance(new_view, UnreadFile):
        raise new_view
    return old_view, new_view


def _packed(view: PlanView) -> bytes:
    # Each distinct entry's bytes once (a layer's modules repeat theirs in every layer),
    # and each module's index into them: a tenth of the bytes to send and to unpack.
    raw = encoded(view.entries).raw
    distinct = list(dict.fromkeys(raw.values()))
    index = dict(zip(distinct, range(len(distinct)), strict=True))
    entries = [list(raw), list(map(index.__getitem__, raw.values())), distinct]
    rest = [view.source, view.mesh, view.rules, view.rule_order, view.plan, view.other]
    return _PACK(["view", entries, _ENCODE(rest)])


def _unpacked(received: bytes, old: Path) -> PlanView:
    try:
        message = _UNPACK(received)
    except msgspec.DecodeError:  # the child died before it said anything
        return _read(old)
    if message[0] == "error":
        raise UnreadFile(old, MetaError(message[1], message[2]))
    fqns, indexes, distinct = message[1]
    raw = dict(zip(fqns, map(distinct.__getitem__, indexes), strict=True))
    source, mesh, rules, rule_order, plan, other = _DECODE(message[2])
    return PlanView(source, mesh, EncodedEntries(raw), rules, rule_order, plan, other)
