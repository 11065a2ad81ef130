"""write_plan's document is built by the generated code directly (no CodegenMeta in
between): the same document dump_meta writes for freeze_plan's meta, and a key the plan
cannot own is refused at freeze, never written over the modules' entries."""

from __future__ import annotations

from pathlib import Path

import pytest

import shardplan
from generated.freeze import freeze_for_writing
from shardplan.artifact.meta import meta_to_dict
from shardplan.errors import FreezeError
from shardplan.examples.llama import LlamaConfig
from shardplan.examples.plan import tensor_parallel_plan
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.older_artifacts import frozen_again


def test_write_plans_document_is_the_document_of_freeze_plans_meta() -> None:
    plan = tensor_parallel_plan(LlamaConfig())
    plan.other_keys = {"producer": "test", "parallel_dims": {"pp": 2}}
    document = freeze_for_writing(plan)
    assert document is not None
    frozen = meta_to_dict(shardplan.freeze_plan(plan))
    assert document.keys() == frozen.keys()
    assert (
        document["parallel_dims"]
        == frozen["parallel_dims"]
        == frozen_again(
            {"parallel_dims": {"pp": 2, "sequence_parallel": True, "loss_parallel": False}}
        )["parallel_dims"]
    )
    assert document["producer"] == "test" and document["injections"] == frozen["injections"]


@pytest.mark.parametrize("key", ["param_plan", "injections"])
def test_other_keys_holding_the_modules_key_is_refused_and_nothing_written(
    key: str, tmp_path: Path
) -> None:
    plan = ShardingPlan(modules={"m": ModuleShardingSpec(out_names=["y"])}, other_keys={key: 1})
    with pytest.raises(
        FreezeError, match=rf"other_keys\[\"{key}\"\]: '{key}' is the key the modules'"
    ):
        shardplan.freeze_plan(plan)
    path = tmp_path / "plan.json"
    with pytest.raises(FreezeError, match=f"'{key}' is the key the modules' specs"):
        shardplan.write_plan(plan, path)
    assert not path.exists()
