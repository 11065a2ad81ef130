"""Import cost (docs/contract.md §12): the table, the spec and the artifact I/O never import
torch.

Real processes throughout: what an import imports is only seen in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHEAP_MODULES = ("shardplan.table.spec", "shardplan.table.spec_fields", "shardplan.artifact.meta")


def importtime_lines(statement: str) -> list[str]:
    """The ``import time:`` lines a fresh ``python -X importtime -c statement`` prints."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in result.stderr.splitlines() if line.startswith("import time:")]


def test_importtime_reports_the_modules_it_imports() -> None:
    # Proves the probe sees imports at all; otherwise "no torch line" would prove nothing.
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in importtime_lines(f"import {', '.join(CHEAP_MODULES)}")
    }
    assert set(CHEAP_MODULES) <= imported


def test_table_spec_and_meta_import_without_torch() -> None:
    lines = importtime_lines(f"import {', '.join(CHEAP_MODULES)}")
    assert [line for line in lines if "torch" in line] == []


def imported(statement: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in importtime_lines(statement)}


HEAVY = ("torch", "msgspec", "orjson", "black", "jinja2")


def test_the_shared_staging_primitive_imports_neither_shardplan_nor_anything_heavy() -> None:
    """generator.staging is imported by the generator, which never imports shardplan (it
    loads the project's own), and by the artifact writer, which runs without black."""
    names = imported("import generator.staging")
    assert "generator.staging" in names
    assert [n for n in names if n.split(".")[0] in ("shardplan", *HEAVY)] == []


def test_the_artifact_writer_imports_no_codec_and_none_of_the_generators_dependencies() -> None:
    names = imported("import shardplan.artifact.atomic")
    assert "generator.staging" in names
    assert [n for n in names if n.split(".")[0] in HEAVY] == []
