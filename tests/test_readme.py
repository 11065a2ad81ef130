"""README's examples do what README says.

Real process: the snippet runs as a user would run it, a script in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO


def _python_block_after(heading: str) -> str:
    """The first ```python block after ``heading`` in README.md."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match[1]


def test_using_it_snippet_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(_python_block_after("## Using it"))
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
