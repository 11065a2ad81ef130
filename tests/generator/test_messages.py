"""Messages that once misled, each as a user meets it: the error names the real place and
the real fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shardplan.artifact.meta import CodegenMeta, dump_meta, load_meta
from shardplan.errors import MetaError
from tests.helpers import run_specgen_here


def test_an_empty_path_is_refused_as_empty_not_as_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for call in (lambda: dump_meta(CodegenMeta(), ""), lambda: load_meta("")):
        with pytest.raises(MetaError) as raised:
            call()
        assert str(raised.value) == "path: the path is empty; pass the artifact file's path"
    assert os.listdir(tmp_path) == []


def test_write_plan_refuses_an_empty_path_the_same_way() -> None:
    from shardplan import write_plan
    from shardplan.examples.llama import LlamaConfig
    from shardplan.examples.plan import tensor_parallel_plan

    with pytest.raises(MetaError, match="^path: the path is empty"):
        write_plan(tensor_parallel_plan(LlamaConfig(n_layers=1)), "")


def test_a_template_rendering_invalid_python_shows_the_line() -> None:
    from generator.emit import format_source
    from generator.errors import GeneratorError

    source = "def f() -> int:\n    return 1\n\n\ndef g():\n    return modules modules\n"
    with pytest.raises(GeneratorError) as raised:
        format_source(source, "rebuild.py", "templates/rebuild.py.j2")
    assert str(raised.value) == (
        "templates/rebuild.py.j2 rendered invalid Python at line 6 of rebuild.py (bad input):\n"
        "  6 | return modules modules"
    )


def test_check_on_a_breaking_edit_names_the_fix_that_works(repo_copy: Path) -> None:
    from tests.helpers import remove_region_dispatch

    remove_region_dispatch(repo_copy)
    check = run_specgen_here(repo_copy, "check")
    assert check.returncode == 1
    assert "Run `make codegen`" not in check.stderr
    assert "so `make codegen` refuses it:" in check.stderr
    assert "`specgen generate --allow-breaking`" in check.stderr
    # What it says holds: a plain generate refuses, the named one does it, check then passes.
    assert run_specgen_here(repo_copy, "generate").returncode == 2
    assert run_specgen_here(repo_copy, "generate", "--allow-breaking").returncode == 0
    assert run_specgen_here(repo_copy, "check").returncode == 0
