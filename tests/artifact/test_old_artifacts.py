"""Artifacts written before the kinds became one mapping and the lock compared meaning
(tests/corpus/drawn_before_one_vocabulary.tar.xz: 300 plans drawn by tests/strategies.py,
frozen and dumped by that code) read back to the same bytes: loaded and dumped, and rebuilt
strictly and written again. Restating the vocabulary changed names, not what crosses."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

import shardplan
from tests.helpers import CORPUS
from tests.older_artifacts import frozen_again_bytes
from tests.strategies import TARGET_ENTRIES

ARCHIVE = CORPUS / "drawn_before_one_vocabulary.tar.xz"


def _artifacts() -> list[tuple[str, bytes]]:
    with tarfile.open(ARCHIVE, mode="r:xz") as archive:
        return [
            (member.name, archive.extractfile(member).read())  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile()
        ]


def test_the_archive_holds_the_three_hundred_drawn_artifacts() -> None:
    assert len(_artifacts()) == 300


@pytest.mark.parametrize("step", ["load and dump", "rebuild and write"])
def test_every_older_artifact_comes_back_byte_for_byte(tmp_path: Path, step: str) -> None:
    differ = []
    for name, data in _artifacts():
        source, target = tmp_path / name, tmp_path / f"again-{name}"
        source.write_bytes(data)
        meta = shardplan.load_meta(source)
        if step == "load and dump":
            shardplan.dump_meta(meta, target)
        else:
            plan = shardplan.rebuild_plan(meta, allow_targets=TARGET_ENTRIES)
            shardplan.write_plan(plan, target)
        # Load and dump keeps the document; rebuilt, it gains the keys written always.
        expected = data if step == "load and dump" else frozen_again_bytes(data)
        if target.read_bytes() != expected:
            differ.append(name)
    assert differ == []
