"""``import shardplan`` is the front door: every name the README uses, each loaded from its
own module on first use, so the door itself costs nothing (docs/contract.md §12)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import shardplan

REPO = Path(__file__).resolve().parents[1]

HOMES = {
    "freeze_plan": "shardplan.api",
    "rebuild_plan": "shardplan.api",
    "write_plan": "shardplan.api",
    "read_plan": "shardplan.api",
    "load_meta": "shardplan.artifact.meta",
    "dump_meta": "shardplan.artifact.meta",
    "apply_plan": "shardplan.parallelize.apply",
    "check_fit": "shardplan.parallelize.fit",
    "Target": "shardplan.convert.targets",
    "ModuleShardingSpec": "shardplan.table.spec",
    "ShardingPlan": "shardplan.table.spec",
    "MetaError": "shardplan.errors",
    "FreezeError": "shardplan.errors",
    "ApplyError": "shardplan.errors",
    # The errors the docs tell users to catch, without importing torch to name them.
    "UntrustedTarget": "shardplan.errors",
    "ArtifactWriteError": "shardplan.errors",
    "StaleGeneratedCode": "shardplan.staleness",
}
# What needs torch by nature: the generated code and the torch integration.
NEED_TORCH = {"freeze_plan", "rebuild_plan", "write_plan", "read_plan", "apply_plan", "check_fit"}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_name_is_its_home_modules_object(name: str) -> None:
    assert getattr(shardplan, name) is getattr(importlib.import_module(HOMES[name]), name)
    namespace: dict[str, object] = {}
    exec(f"from shardplan import {name}", namespace)
    assert namespace[name] is getattr(shardplan, name)


def test_the_door_lists_its_names() -> None:
    assert sorted(shardplan.__all__) == sorted(HOMES)
    assert set(HOMES) <= set(dir(shardplan))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'shardplan' has no attribute 'load_metaa'"):
        shardplan.load_metaa  # noqa: B018
    assert not hasattr(shardplan, "document_of")


def fresh(statement: str) -> str:
    """What ``statement`` prints in a fresh interpreter run from the checkout."""
    result = subprocess.run(
        [sys.executable, "-c", statement], cwd=REPO, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_the_door_and_every_name_without_torch_by_nature_import_no_torch() -> None:
    cheap = sorted(set(HOMES) - NEED_TORCH)
    probe = (
        "import sys, shardplan; before = 'torch' in sys.modules; shardplan.load_meta; "
        f"[getattr(shardplan, n) for n in {cheap!r}]; "
        "print(before, 'torch' in sys.modules, 'shardplan.api' in sys.modules)"
    )
    assert fresh(probe) == "False False False"
