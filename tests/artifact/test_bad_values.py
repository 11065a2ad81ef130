"""Only MetaError and FreezeError escape (issue 9, point 5), and writes fail cleanly
(point 6): each case a user hit, with the place its message must name."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import shardplan
from shardplan.artifact.meta import CodegenMeta, dump_meta, load_meta, meta_from_json, meta_to_json
from shardplan.errors import ArtifactWriteError, FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.cases import nested_lists


def cyclic() -> dict[str, Any]:
    table: dict[str, Any] = {"experts": [1]}
    table["experts"].append(table)
    return table


# ------------------------------------------------------------------ freeze


@pytest.mark.parametrize(
    ("ep_stack", "path", "fragment"),
    [
        # Named where the cycle closes: the list is met again inside itself.
        (cyclic(), '._ep_stack["experts"][1]["experts"]', "contains itself"),
        ({"deep": nested_lists(5_000)}, "._ep_stack", "deeper than 64 levels"),
        ({1: "a"}, "._ep_stack", "key 1 (int) must be a str"),
        ({"k": {2.5: "a"}}, '._ep_stack["k"]', "key 2.5 (float) must be a str"),
        ({"k": 10**5000}, '._ep_stack["k"]', "digits"),
        ({"k": float("inf")}, '._ep_stack["k"]', "not a finite number"),
    ],
    ids=["cycle", "deep", "int_key", "float_key", "huge_int", "inf"],
)
def test_ep_stack_json_cannot_carry_is_a_freeze_error_at_its_place(
    ep_stack: Any, path: str, fragment: str
) -> None:
    spec = ModuleShardingSpec(_ep_stack=ep_stack)
    with pytest.raises(FreezeError) as caught:
        shardplan.freeze_plan(ShardingPlan(modules={"m": spec}))
    assert caught.value.path == f'modules["m"]{path}'
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        (ShardingPlan(modules={3: ModuleShardingSpec()}), "modules[3]"),  # type: ignore[dict-item]
        (ShardingPlan(modules={"m": {"params": {}}}), 'modules["m"]'),  # type: ignore[dict-item]
        (ShardingPlan(special_handlers={"m": 3}), 'special_handlers["m"]'),  # type: ignore[dict-item]
        (ShardingPlan(special_handlers={1: "h"}), "special_handlers[1]"),  # type: ignore[dict-item]
        (ShardingPlan(mesh_dim_names=("tp", 1)), "mesh_dim_names[1]"),  # type: ignore[arg-type]
        (ShardingPlan(mesh_dim_names="tp"), "mesh_dim_names"),  # type: ignore[arg-type]
        (ShardingPlan(tied_pairs=[("a", "b", "c")]), "tied_pairs[0]"),  # type: ignore[list-item]
        (ShardingPlan(tied_pairs=[("a", None)]), "tied_pairs[0][1]"),  # type: ignore[list-item]
        (ShardingPlan(sequence_parallel=1), "sequence_parallel"),  # type: ignore[arg-type]
        (ShardingPlan(loss_parallel=None), "loss_parallel"),  # type: ignore[arg-type]
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_bad_plan_setting_is_a_freeze_error_not_a_later_write_error(
    plan: ShardingPlan, path: str
) -> None:
    with pytest.raises(FreezeError) as caught:
        shardplan.freeze_plan(plan)
    assert caught.value.path == path


def test_is_boundary_none_is_refused_since_it_would_come_back_true() -> None:
    spec = ModuleShardingSpec(is_boundary=None)  # type: ignore[arg-type]
    with pytest.raises(FreezeError) as caught:
        shardplan.freeze_plan(ShardingPlan(modules={"m": spec}))
    assert caught.value.path == 'modules["m"].is_boundary'
    assert "True" in str(caught.value)


# ------------------------------------------------------------------ the writer


@pytest.mark.parametrize(
    ("meta", "path", "fragment"),
    [
        (CodegenMeta(param_plan={1: {}}), "param_plan[1]", "must be a string"),  # type: ignore[dict-item]
        (CodegenMeta(param_plan={"m": {"params": {2: {}}}}), 'param_plan["m"]["params"]', "key 2"),
        (CodegenMeta(extra={"x": [float("nan")]}), "x[0]", "not a finite number"),
        (CodegenMeta(extra={"x": {"s": {1, 2}}}), 'x["s"]', "(set) has no JSON form"),
        (CodegenMeta(extra={"x": cyclic()}), 'x["experts"][1]', "contains itself"),
        (CodegenMeta(extra={"x": [object()]}), "x[0]", "(object) has no JSON form"),
        (CodegenMeta(mesh_dim_names=("tp",)), "mesh_dim_names", "got Python tuple"),  # type: ignore[arg-type]
    ],
    ids=["int_fqn", "int_key", "nan", "set", "cycle", "object", "tuple_mesh"],
)
def test_a_value_json_cannot_write_is_a_meta_error_at_its_place(
    meta: CodegenMeta, path: str, fragment: str, tmp_path: Path
) -> None:
    target = tmp_path / "codegen_meta.json"
    with pytest.raises(MetaError) as caught:
        dump_meta(meta, target)
    assert caught.value.path == path
    assert fragment in str(caught.value)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_int_keys_are_never_written_as_strings() -> None:
    with pytest.raises(MetaError):
        meta_to_json(CodegenMeta(special_handlers={1: "h"}))  # type: ignore[dict-item]


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e999"])
def test_a_number_that_overflows_a_float_is_refused_like_infinity(number: str) -> None:
    with pytest.raises(MetaError) as caught:
        meta_from_json(f'{{"param_plan": {{}}, "x": {number}}}')
    assert "overflows" in str(caught.value)


def test_a_python_built_meta_with_int_fqn_rebuilds_to_a_meta_error() -> None:
    with pytest.raises(MetaError) as caught:
        shardplan.rebuild_plan(CodegenMeta(param_plan={1: {}}))  # type: ignore[dict-item]
    assert caught.value.path == "param_plan[1]"


# ------------------------------------------------------------------ writes fail cleanly


def meta() -> CodegenMeta:
    return shardplan.freeze_plan(ShardingPlan(modules={"m": ModuleShardingSpec()}))


def test_dump_into_a_missing_folder_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "codegen_meta.json"
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), target)
    assert str(target) in str(caught.value) and "does not exist" in str(caught.value)
    assert caught.value.filename == str(target)
    assert ".tmp" not in str(caught.value)


def test_dump_onto_a_directory_names_the_target_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "codegen_meta.json"
    target.mkdir()
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), target)
    assert caught.value.errno == errno.EISDIR
    assert [p.name for p in tmp_path.iterdir()] == ["codegen_meta.json"]


def test_dump_into_a_read_only_folder_names_the_target_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "codegen_meta.json"
    target.write_text("old")

    # Root (as CI runs) ignores a folder's write bit, so the refusal is the kernel's
    # answer for a read-only folder, given at the rename.
    def refuse(src: str, dst: str) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", dst)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ArtifactWriteError) as caught:
        dump_meta(meta(), target)
    assert str(target) in str(caught.value) and "Permission denied" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["codegen_meta.json"]
    assert target.read_text() == "old"


def test_a_failure_while_writing_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "codegen_meta.json"
    target.write_text("old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ArtifactWriteError, match="No space left"):
        dump_meta(meta(), target)
    assert [p.name for p in tmp_path.iterdir()] == ["codegen_meta.json"]
    assert target.read_text() == "old"


def test_overwriting_keeps_the_file_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "codegen_meta.json"
    target.write_text("old")
    target.chmod(0o600)
    dump_meta(meta(), target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert load_meta(target) == meta()


def test_writing_through_a_symlink_updates_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "codegen_meta.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "codegen_meta.json"
    link.symlink_to(real)
    dump_meta(meta(), link)
    assert link.is_symlink()
    assert real.read_text() == meta_to_json(meta())
    assert sorted(p.name for p in real.parent.iterdir()) == ["codegen_meta.json"]
