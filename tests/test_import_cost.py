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
