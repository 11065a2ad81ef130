"""The generated rebuild declares each local with its field's own annotation, so the type
checker sees a kind function whose return type disagrees with the field (issue 43):
`make mypy` fails on it, here in a copy whose kind function says it returns another type.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, copy_repo, replace_once

RETURNS = "def rebuild_json_object(value: Any, path: str) -> dict[str, Any]:"


def _mypy(root: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict in ``root``, torch's own modules read as Any (its stubs take 20 s to
    read afresh; the disagreement checked here is between the project's own types)."""
    config = root / "mypy-test.ini"
    config.write_text("[mypy]\nstrict = True\n\n[mypy-torch.*]\nfollow_imports = skip\n")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", os.devnull]
        + list(paths),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_kind_function_returning_another_type_than_its_field_fails_mypy(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / "repo")
    # _ep_stack: dict[str, Any] is rebuilt by rebuild_json_object, which now says it gives
    # a list (its body returns Any, so the function itself still checks).
    replace_once(
        root, "shardplan/convert/kinds.py", RETURNS, RETURNS.replace("dict[str, Any]", "list[str]")
    )
    result = _mypy(root, "generated/rebuild.py")
    assert result.returncode == 1, result.stdout + result.stderr
    # The one error the edit makes at each of _ep_stack's assignments, the rebuild's and
    # read_plan's one pass (a copy whose own fields disagree with their kinds has others:
    # what make mypy is for).
    errors = [line for line in result.stdout.splitlines() if "list[str]" in line]
    assert len(errors) == 2, result.stdout
    source = (root / "generated" / "rebuild.py").read_text().splitlines()
    for error in errors:
        assert re.match(
            r"generated/rebuild\.py:\d+: error: Incompatible types in assignment", error
        )
        # its row's assignment (the error is reported on the value's first line)
        above = source[: int(error.split(":")[1])]
        assert "_ep_stack" in next(t for t in reversed(above) if " = " in t), error
        assert 'variable has type "dict[str, Any]"' in error, error
    line = int(errors[0].split(":")[1])  # a line of the statement that assigns _ep_stack
    lines = (root / "generated/rebuild.py").read_text().splitlines()[:line]
    assert "_ep_stack: dict[str, Any] = (" in next(
        t for t in reversed(lines) if ": " in t and " = " in t
    )


def test_every_rebuilt_local_is_declared_with_its_fields_annotation() -> None:
    import dataclasses

    from shardplan.table.plan_fields import PLAN_FIELDS
    from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
    from shardplan.table.spec_fields import SPEC_FIELDS

    rebuild = (REPO / "generated/rebuild.py").read_text()
    for cls, rows in ((ModuleShardingSpec, SPEC_FIELDS), (ShardingPlan, PLAN_FIELDS)):
        annotations = {f.name: f.type for f in dataclasses.fields(cls)}
        for row in rows:
            if row.name in annotations and row.freeze:
                assert f" {row.name}: {annotations[row.name]} = " in rebuild, row.name
