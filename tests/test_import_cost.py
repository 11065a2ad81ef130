"""Import cost (docs/contract.md §12): the table, the spec and the artifact I/O never import
torch.

Real processes throughout: what an import imports is only seen in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

# The tests here start fresh interpreters to watch what they import (and scan sources).
pytestmark = pytest.mark.processes

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


def test_the_shared_staging_primitive_imports_nothing_but_its_packages() -> None:
    """shardplan.artifact.staging is imported by the artifact writer, which runs without
    black, and by the generator when it writes (standard library only)."""
    names = imported("import shardplan.artifact.staging")
    assert "shardplan.artifact.staging" in names
    ours = {n for n in names if n.split(".")[0] in ("shardplan", "generator", "generated")}
    assert ours == {"shardplan", "shardplan.artifact", "shardplan.artifact.staging"}
    assert [n for n in names if n.split(".")[0] in HEAVY] == []


def test_the_artifact_writer_imports_no_codec_and_none_of_the_generators_dependencies() -> None:
    names = imported("import shardplan.artifact.atomic")
    assert "shardplan.artifact.staging" in names
    assert [n for n in names if n.split(".")[0] in ("generator", *HEAVY)] == []


def test_the_generator_imports_no_shardplan_module_until_it_loads_the_projects() -> None:
    """The generator loads the project's own shardplan from the project's folder and refuses
    one imported from elsewhere first (table.py): importing it must not import shardplan."""
    names = imported("import generator.__main__, generator.emit, generator.pipeline")
    assert "generator.emit" in names
    assert [n for n in names if n.split(".")[0] == "shardplan"] == []


def test_no_runtime_module_imports_the_generator() -> None:
    """The runtime stands alone: no module under shardplan/ names the generator package in
    an import, at its top or inside a function."""
    offenders = []
    for path in sorted((REPO / "shardplan").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            offenders += [
                f"{path.relative_to(REPO)}:{node.lineno}: {module}"
                for module in modules
                if module.split(".")[0] == "generator"
            ]
    assert offenders == []
