"""Compiled templates and black's output, kept for the process and in ``.specgen-cache/``: an
entry is found by a digest of all it is a function of and carries a digest of its own bytes,
so one that does not match is a miss, never an output; an unusable folder only costs time."""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import suppress
from pathlib import Path

import jinja2

FOLDER = ".specgen-cache"  # in the project's root, beside pyproject.toml; git ignores it


def digest(data: bytes) -> str:
    """The hex sha256 of ``data``: how entries are found and checked, and the inputs digest."""
    return hashlib.sha256(data).hexdigest()


class Store:
    """Entries by key, in memory and, where ``folder`` is given, on disk (atomic writes)."""

    def __init__(self) -> None:
        self._held: dict[str, bytes] = {}
        self.folder: Path | None = None

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / digest(key.encode("utf-8"))

    def get(self, key: str) -> bytes | None:
        """The bytes put under ``key``, if they are found whole."""
        if key not in self._held and (path := self._path(key)) is not None:
            with suppress(OSError):
                check, _, data = path.read_bytes().partition(b"\n")
                if check == digest(data).encode("ascii"):  # else cut short or altered: a miss
                    self._held[key] = data
        return self._held.get(key)

    def put(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key``; a folder that cannot be written is passed over."""
        self._held[key] = data
        if (path := self._path(key)) is None:
            return
        with suppress(OSError):  # a read-only checkout still generates, only without the cache
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, staged = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(handle, "wb") as out:
                out.write(digest(data).encode("ascii") + b"\n" + data)
            os.replace(staged, path)


STORE = Store()


def use_folder(root: Path) -> None:
    """Keep entries in ``root``'s cache folder from now on."""
    STORE.folder = root / FOLDER


class Bytecode(jinja2.BytecodeCache):
    """Compiled templates by name (Jinja checks each against its source's checksum)."""

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return f"jinja {jinja2.__version__} {name}"  # its folder: an error names it anyway

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if (code := STORE.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        STORE.put(bucket.key, bucket.bytecode_to_string())
