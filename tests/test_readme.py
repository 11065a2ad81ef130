"""README's first example runs as written, as a newcomer runs it: a script in a fresh
interpreter, in an empty folder. (tests/test_docs.py runs every block of every page.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO


def _first_python_block() -> str:
    """README's first ```python block: the one "Using it" shows."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"^```python\n(.*?)^```$", text, re.S | re.M)
    assert match, "README.md has no python block"
    assert text.rfind("\n## ", 0, match.start()) == text.index("\n## Using it"), "not in Using it"
    return match[1]


@pytest.mark.processes
def test_the_readmes_first_python_block_runs_as_written_in_an_empty_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "snippet.py").write_text(_first_python_block())
    # In a fresh folder, as a user would: the artifact it writes lands there.
    result = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    artifact = json.loads((tmp_path / "codegen_meta.json").read_text())
    assert "model.layers.0.self_attn" in artifact["param_plan"]
