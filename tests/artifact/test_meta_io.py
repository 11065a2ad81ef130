"""The artifact (docs/contract.md §9) and the real-world conformance vector: a hyper-parallel
Qwen3-MoE meta."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from shardplan import reference
from shardplan.artifact.meta import CodegenMeta, dump_meta, load_meta, meta_from_json, meta_to_json
from shardplan.artifact.shapes import UNSET
from shardplan.convert.targets import Target
from tests.helpers import QWEN3_MOE, shared_fixture
from tests.older_artifacts import frozen_again

TRUSTED = ("hyper_parallel.*",)  # the package the shared fixture's Targets name: its own subtree


@pytest.fixture(scope="module")
def fixture_text() -> str:
    return shared_fixture(QWEN3_MOE).read_text(encoding="utf-8")


@pytest.fixture
def fixture_meta() -> CodegenMeta:
    return load_meta(shared_fixture(QWEN3_MOE))


def rules_by_match(rules: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_match = {rule["match"]: rule for rule in rules}
    assert len(by_match) == len(rules), "two rules share a match"
    return by_match


def test_fixture_loads_with_its_plan_and_settings(fixture_meta: CodegenMeta) -> None:
    assert len(fixture_meta.param_plan) == 27
    assert len(fixture_meta.injections) == 8
    assert fixture_meta.mesh_dim_names == ["cp", "tp"]
    assert fixture_meta.parallel_dims["loss_parallel"] is True


def test_fixture_rebuild_then_freeze_gives_the_same_param_plan_bytes(
    fixture_meta: CodegenMeta,
) -> None:
    refrozen = reference.freeze_plan(
        reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    )
    expected = frozen_again(json.loads(meta_to_json(fixture_meta)))["param_plan"]
    assert json.dumps(refrozen.param_plan, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert refrozen.param_plan == expected


def test_fixture_rebuild_then_freeze_gives_the_same_injection_rules(
    fixture_meta: CodegenMeta,
) -> None:
    refrozen = reference.freeze_plan(
        reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    )
    expected = frozen_again(json.loads(meta_to_json(fixture_meta)))["injections"]
    assert rules_by_match(refrozen.injections) == rules_by_match(expected)


def test_fixture_rebuild_then_freeze_gives_the_same_frozen_sharded_params(
    fixture_meta: CodegenMeta,
) -> None:
    refrozen = reference.freeze_plan(
        reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    )
    assert refrozen.frozen_sharded_params == fixture_meta.frozen_sharded_params


def test_fixture_rebuild_keeps_the_negative_shard_dim_text(fixture_meta: CodegenMeta) -> None:
    plan = reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    refrozen = reference.freeze_param_plan(plan)
    assert refrozen["lm_head"]["out_src"] == fixture_meta.param_plan["lm_head"]["out_src"]
    assert "S(-1)" in json.dumps(refrozen["lm_head"])


def test_fixture_rebuild_does_not_import_the_injected_targets(fixture_meta: CodegenMeta) -> None:
    plan = reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    wrapper = plan.modules["model.layers.0.self_attn"].inner_wrapper
    assert isinstance(wrapper, Target)
    assert wrapper.path.startswith("hyper_parallel.")
    assert "hyper_parallel" not in sys.modules


def test_fixture_rebuilt_compute_fn_keeps_its_kwargs(fixture_meta: CodegenMeta) -> None:
    plan = reference.rebuild_live_plan_from_meta(fixture_meta, allow_targets=TRUSTED)
    spec = plan.modules["model.layers.0.mlp"]
    assert isinstance(spec.local_compute_fn, Target)
    assert spec.local_compute_fn.kwargs == {"use_grouped_gemm": True}
    assert spec._ep_size == 2


def test_meta_to_json_of_the_fixture_is_its_text_plus_a_newline(
    fixture_meta: CodegenMeta, fixture_text: str
) -> None:
    assert meta_to_json(fixture_meta) == fixture_text + "\n"


def test_dump_meta_writes_the_json_text_as_utf8_bytes(
    fixture_meta: CodegenMeta, fixture_text: str, tmp_path: Path
) -> None:
    target = tmp_path / "codegen_meta.json"
    dump_meta(fixture_meta, target)
    assert target.read_bytes() == (fixture_text + "\n").encode("utf-8")


def test_dump_meta_twice_writes_identical_bytes(fixture_meta: CodegenMeta, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    dump_meta(fixture_meta, first)
    dump_meta(load_meta(first), second)
    dump_meta(fixture_meta, first)
    assert first.read_bytes() == second.read_bytes()


def test_dump_meta_leaves_no_temporary_files(fixture_meta: CodegenMeta, tmp_path: Path) -> None:
    dump_meta(fixture_meta, tmp_path / "codegen_meta.json")
    dump_meta(fixture_meta, tmp_path / "codegen_meta.json")
    assert [p.name for p in tmp_path.iterdir()] == ["codegen_meta.json"]


def test_dump_meta_that_fails_to_rename_keeps_the_old_file_and_no_temp(
    fixture_meta: CodegenMeta, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "codegen_meta.json"
    target.write_bytes(b"old")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        dump_meta(fixture_meta, target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["codegen_meta.json"]


def test_dump_meta_gives_the_file_ordinary_permissions(
    fixture_meta: CodegenMeta, tmp_path: Path
) -> None:
    umask = os.umask(0o022)
    try:
        dump_meta(fixture_meta, tmp_path / "codegen_meta.json")
    finally:
        os.umask(umask)
    assert (tmp_path / "codegen_meta.json").stat().st_mode & 0o777 == 0o644


def test_unknown_top_level_keys_survive_load_and_dump(tmp_path: Path) -> None:
    unknown = {
        "codegen_version": "9.9",
        "outputs": {"diff": {"lines": 1}},
        "zz_list": [1, "two", None],
    }
    source = tmp_path / "in.json"
    source.write_text(json.dumps({"param_plan": {}, **unknown}))
    meta = load_meta(source)
    assert meta.extra == unknown
    dump_meta(meta, tmp_path / "out.json")
    written = json.loads((tmp_path / "out.json").read_text())
    assert {key: written[key] for key in unknown} == unknown


def test_fixture_unknown_keys_are_kept_in_extra(
    fixture_meta: CodegenMeta, fixture_text: str
) -> None:
    document = json.loads(fixture_text)
    assert fixture_meta.extra["model_class"] == "Qwen3MoeForCausalLM"
    assert fixture_meta.extra["source"] == document["source"]


def test_codegen_meta_takes_keyword_arguments() -> None:
    meta = CodegenMeta(
        param_plan={"m": {"is_boundary": True}}, injections=[{"match": "m", "ep_size": 2}]
    )
    assert meta.param_plan == {"m": {"is_boundary": True}}
    assert meta.injections == [{"match": "m", "ep_size": 2}]
    # A plan-level key not given is UNSET: the document has no such key, and none is written.
    assert meta.special_handlers is UNSET and meta.mesh_dim_names is UNSET and meta.extra == {}


def test_the_same_meta_always_gives_the_same_json(fixture_meta: CodegenMeta) -> None:
    text = meta_to_json(fixture_meta)
    assert meta_to_json(meta_from_json(text)) == text


def test_meta_json_is_indented_sorted_with_one_trailing_newline() -> None:
    meta = CodegenMeta(param_plan={"b": {}, "a": {}}, extra={"z": 1})
    text = meta_to_json(meta)
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert text.index('"a"') < text.index('"b"')


def test_rebuild_does_not_import_an_importable_target_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "shardplan_rebuild_lazy_probe"
    (tmp_path / f"{module}.py").write_text("def wrap(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    meta = CodegenMeta(
        param_plan={"m": {}},
        injections=[{"match": "m", "inner_wrapper": {"_target_": f"{module}.wrap"}}],
    )
    plan = reference.rebuild_live_plan_from_meta(meta, allow_targets=(module,))
    wrapper = plan.modules["m"].inner_wrapper
    assert module not in sys.modules
    assert isinstance(wrapper, Target) and wrapper(7) == 7
    sys.modules.pop(module)
