"""The in-process runner of tests/helpers.py: a run reads the copy's files, and the real
checkout's modules are the ones imported again after it."""

from __future__ import annotations

import sys
from importlib import import_module
from pathlib import Path

import shardplan.table.spec
from shardplan.table.spec import ModuleShardingSpec
from tests.helpers import call_in, edit_table, run_python_here, run_specgen_here


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
