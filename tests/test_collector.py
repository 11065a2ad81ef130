"""The collector pause: automatic collection off inside the bulk calls, the caller's
setting after them. The pause sets the first threshold to 0 and never touches
``gc.isenabled()`` (tests/test_collector_threads.py: why, with threads)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shardplan import api
from shardplan.artifact import meta as meta_module
from shardplan.artifact.meta import CodegenMeta
from shardplan.collector import pause_collector, resume_collector
from shardplan.errors import FreezeError, MetaError
from shardplan.table.spec import ModuleShardingSpec, ShardingPlan
from tests.helpers import automatic_collection_on, collector_restored


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    yield from collector_restored()


def _seen_inside(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bool]:
    """Record automatic_collection_on() inside api's call of ``name``."""
    seen: list[bool] = []
    original = getattr(api, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(automatic_collection_on())
        return original(*args, **kwargs)

    monkeypatch.setattr(api, name, spy)
    return seen


def test_paused_inside_and_restored_after() -> None:
    gc.enable()
    gc.set_threshold(700, 10, 10)
    paused = pause_collector()
    assert paused and not automatic_collection_on() and gc.isenabled()
    resume_collector(paused)
    assert automatic_collection_on() and gc.get_threshold() == (700, 10, 10)


def test_a_caller_that_disabled_it_keeps_it_off() -> None:
    gc.disable()
    paused = pause_collector()
    assert not automatic_collection_on()
    resume_collector(paused)
    assert not gc.isenabled()


def test_nested_pauses_restore_the_outer_setting() -> None:
    gc.enable()
    thresholds = gc.get_threshold()
    outer = pause_collector()
    resume_collector(pause_collector())
    assert not automatic_collection_on()
    resume_collector(outer)
    assert automatic_collection_on() and gc.get_threshold() == thresholds


def test_freeze_plan_and_rebuild_plan_run_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    frozen_seen = _seen_inside(monkeypatch, "_freeze_plan")
    rebuilt_seen = _seen_inside(monkeypatch, "rebuild_live_plan_from_meta")
    meta = api.freeze_plan(ShardingPlan(modules={"m": ModuleShardingSpec(out_names=["y"])}))
    plan = api.rebuild_plan(meta)
    assert frozen_seen == [False] and rebuilt_seen == [False]
    assert plan.modules["m"].out_names == ["y"]
    assert automatic_collection_on()


def test_a_refused_rebuild_restores_the_collector() -> None:
    gc.enable()
    with pytest.raises(MetaError):
        api.rebuild_plan(CodegenMeta(param_plan={"m": {"is_boundary": 1}}))
    assert automatic_collection_on()


def test_load_meta_and_dump_meta_run_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pause for the whole call: what the decode builds is not collected over and over
    by meta_from_dict's and check_meta's allocations either."""
    gc.enable()
    seen: list[tuple[str, bool]] = []
    for name in ("meta_to_bytes", "meta_from_dict"):
        original = getattr(meta_module, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            seen.append((_name, automatic_collection_on()))
            return _original(*args, **kwargs)

        monkeypatch.setattr(meta_module, name, spy)
    path = tmp_path / "codegen_meta.json"
    meta_module.dump_meta(CodegenMeta(param_plan={"m": {}}), path)
    assert meta_module.load_meta(path).param_plan == {"m": {}}
    assert seen == [("meta_to_bytes", False), ("meta_from_dict", False)]
    assert automatic_collection_on()


def test_pausing_starts_no_collection() -> None:
    """After a paused call the young generation is full: pausing again must allocate no
    tracked object (entering a ``with`` block would: its bound __exit__), which would
    collect all of it there."""
    gc.enable()
    started: list[str] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(phase)

    threshold = gc.get_threshold()[0]
    gc.collect()
    paused = pause_collector()
    kept = [[index] for index in range(5 * threshold)]  # over the threshold
    resume_collector(paused)
    gc.callbacks.append(record)  # from here, nothing but the pause allocates
    paused = pause_collector()
    resume_collector(paused)
    gc.callbacks.remove(record)
    assert started == []
    assert len(kept) > gc.get_threshold()[0]


def test_a_refused_freeze_restores_the_collector() -> None:
    gc.enable()
    with pytest.raises(FreezeError):
        api.freeze_plan(ShardingPlan(modules={"m": ModuleShardingSpec(is_boundary=None)}))
    assert automatic_collection_on()


def test_dump_meta_and_load_meta_pause_before_anything_else(tmp_path: Path) -> None:
    """After a paused bulk call the young generation holds all that call built, so the next
    call must pause before its first allocation, or that one allocation collects it all:
    checking dump_meta's and load_meta's arguments first did (about 40 ms at 10k modules,
    moved into `make bench`'s write path)."""
    plan = ShardingPlan(modules={f"m{i}": ModuleShardingSpec(out_names=["y"]) for i in range(2000)})
    path = tmp_path / "codegen_meta.json"
    seen: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.enable()
    gc.collect()
    gc.callbacks.append(watch)
    try:
        meta = api.freeze_plan(plan)
        meta_module.dump_meta(meta, path)
        after_dump = len(seen)
        meta_module.load_meta(path)
        after_load = len(seen)
    finally:
        gc.callbacks.remove(watch)
    assert (after_dump, after_load) == (0, 0)
