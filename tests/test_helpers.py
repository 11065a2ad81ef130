"""The in-process runner of tests/helpers.py: a run reads the copy's files, and the real
checkout's modules are the ones imported again after it. And the suite's own shape: folders
like the package's, small modules, shared helpers in tests/ beside them (issue 52)."""

from __future__ import annotations

import ast
import sys
from importlib import import_module
from pathlib import Path

import shardplan.table.spec
from shardplan.table.spec import ModuleShardingSpec
from tests.helpers import REPO, call_in, edit_table, run_python_here, run_specgen_here


def test_an_in_process_run_reads_the_copy_s_table_not_the_checkout_s(repo_copy: Path) -> None:
    edit_table('SpecField("in_dst", "in_dst"', 'SpecField("in_dst", "in_src"')(repo_copy)
    result = run_specgen_here(repo_copy, "check")
    assert result.returncode == 2 and "key 'in_src' is already used" in result.stderr
    assert call_in(repo_copy, lambda: import_module("shardplan.table.spec").__file__) == str(
        repo_copy / "shardplan" / "table" / "spec.py"
    )


def test_the_checkout_s_modules_are_back_after_an_in_process_run(repo_copy: Path) -> None:
    before = {n: m for n, m in sys.modules.items() if n.partition(".")[0] == "shardplan"}
    path = sys.path[:]
    assert run_specgen_here(repo_copy, "check").returncode == 0
    script = "from shardplan.table.spec import ModuleShardingSpec; print(ModuleShardingSpec())"
    assert run_python_here(repo_copy, "-c", script).returncode == 0
    after = {n: m for n, m in sys.modules.items() if n.partition(".")[0] == "shardplan"}
    assert after == before and sys.path == path
    assert sys.modules["shardplan.table.spec"] is shardplan.table.spec
    assert shardplan.table.spec.ModuleShardingSpec is ModuleShardingSpec


def test_an_exception_in_process_is_a_traceback_and_status_1(repo_copy: Path) -> None:
    result = run_python_here(repo_copy, "-c", "raise KeyError('params')")
    assert result.returncode == 1 and "Traceback" in result.stderr and "KeyError" in result.stderr


def test_the_tests_are_shaped_like_the_package() -> None:
    """Each sub-folder of tests/ is a folder of the code; at most 12 test modules stand
    directly in tests/, none is over 600 lines, and no test module imports another: what
    several draw from lives in the helper modules of tests/ (tests/cases.py, helpers.py ...)."""
    tests = REPO / "tests"
    code = {p.name for p in (REPO / "shardplan").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= code | {"generator", "generated"}, folders - code
    assert len(list(tests.glob("test_*.py"))) <= 12
    modules = [*tests.glob("test_*.py"), *tests.glob("*/test_*.py")]
    assert {
        p.name: len(p.read_text().splitlines())
        for p in modules
        if len(p.read_text().splitlines()) > 600
    } == {}
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.rpartition(".")[2].startswith("test_")], path
