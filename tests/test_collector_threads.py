"""The collector pause with threads (issue 19, point 10): the pause is the process's, so
it never touches the program's ``gc.isenabled()`` switch, and nested or overlapping
pauses end with exactly the thresholds the program had."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shardplan import api, collector
from shardplan.artifact.meta import CodegenMeta
from shardplan.collector import pause_collector, resume_collector
from tests.helpers import automatic_collection_on, collector_restored


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    yield from collector_restored()


class Paused:
    """A thread that pauses, waits to be told, and resumes."""

    def __init__(self) -> None:
        self.paused, self.go_on = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        assert self.paused.wait(10)

    def _run(self) -> None:
        token = pause_collector()
        self.paused.set()
        self.go_on.wait(10)
        resume_collector(token)

    def resume(self) -> None:
        self.go_on.set()
        self.thread.join(10)


def inside_rebuild(monkeypatch: pytest.MonkeyPatch, while_inside: Callable[[], None]) -> None:
    """Run ``while_inside`` in this thread while a worker thread is inside rebuild_plan."""
    inside, done = threading.Event(), threading.Event()
    original = api.rebuild_live_plan_from_meta

    def slow(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        done.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "rebuild_live_plan_from_meta", slow)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(api.rebuild_plan(CodegenMeta())))
    worker.start()
    assert inside.wait(10)
    while_inside()
    done.set()
    worker.join(10)
    assert len(results) == 1, "the worker's rebuild_plan did not return"


def test_a_gc_disable_made_while_another_thread_rebuilds_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.enable()
    inside_rebuild(monkeypatch, gc.disable)
    assert not gc.isenabled()


def test_a_gc_enable_made_while_another_thread_rebuilds_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.disable()
    inside_rebuild(monkeypatch, gc.enable)
    assert gc.isenabled() and automatic_collection_on()


def test_a_threshold_set_while_another_thread_rebuilds_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.enable()
    inside_rebuild(monkeypatch, lambda: gc.set_threshold(555))
    assert gc.get_threshold()[0] == 555


def test_the_pause_leaves_gc_isenabled_as_it_was() -> None:
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        token = pause_collector()
        assert gc.isenabled() is enabled and gc.get_threshold()[0] == 0
        resume_collector(token)
        assert gc.isenabled() is enabled


def test_an_overlapping_pause_keeps_collection_off_until_the_last_one_ends() -> None:
    gc.enable()
    thresholds = gc.get_threshold()
    first = Paused()
    second = Paused()
    first.resume()
    assert not automatic_collection_on(), "the second thread's call is still paused"
    second.resume()
    assert automatic_collection_on() and gc.get_threshold() == thresholds


def test_pauses_ending_in_the_order_they_began_restore_the_thresholds() -> None:
    gc.enable()
    gc.set_threshold(1234, 11, 12)
    first = Paused()
    token = pause_collector()
    first.resume()
    assert not automatic_collection_on()
    resume_collector(token)
    assert gc.get_threshold() == (1234, 11, 12) and gc.isenabled()


def test_many_threads_pausing_at_once_end_with_the_programs_thresholds() -> None:
    """Whatever the interleaving, every pause and resume ends with the thresholds the
    program had before, and collection was off whenever some pause was open."""
    gc.enable()
    gc.set_threshold(700, 10, 10)
    open_pauses = [0]
    count_lock = threading.Lock()
    seen_on_while_paused: list[bool] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            token = pause_collector()
            with count_lock:
                open_pauses[0] += 1
            if rng.random() < 0.5:
                nested = pause_collector()
                resume_collector(nested)
            seen_on_while_paused.append(automatic_collection_on())
            with count_lock:
                open_pauses[0] -= 1
            resume_collector(token)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert gc.get_threshold() == (700, 10, 10) and gc.isenabled()
    assert not any(seen_on_while_paused)
    assert collector._pauses == 0


def test_a_resume_without_a_pause_changes_nothing() -> None:
    """resume_collector(False), or a resume with no pause open (a benchmark's stand-in
    pause), leaves the thresholds alone."""
    gc.set_threshold(700, 10, 10)
    resume_collector(False)
    resume_collector(True)
    assert gc.get_threshold() == (700, 10, 10)
    token = pause_collector()
    resume_collector(token)
    assert gc.get_threshold() == (700, 10, 10)


def test_no_automatic_collection_starts_during_a_pause_and_it_does_after() -> None:
    gc.enable()
    started: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    threshold = gc.get_threshold()[0]
    gc.collect()
    gc.callbacks.append(record)
    try:
        token = pause_collector()
        kept = [[index] for index in range(50 * threshold)]
        assert started == []
        resume_collector(token)
        more = [[index] for index in range(2 * threshold)]
    finally:
        gc.callbacks.remove(record)
    assert started, "automatic collection must come back after the pause"
    assert len(kept) > len(more)


def test_pausing_after_a_paused_call_starts_no_collection_even_with_tuples_used_up() -> None:
    """Reading and setting the threshold builds a 3-tuple and a 1-tuple. After a paused call
    kept thousands of tuples, CPython's tuple free lists hold only what resume_collector
    dropped; a caller that takes those too must not make the next pause allocate a counted
    tuple, which would collect all the call built there and then."""
    gc.enable()
    started: list[str] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(phase)

    gc.collect()
    token = pause_collector()
    kept = [((index,), (index, index, index)) for index in range(5_000)]
    resume_collector(token)
    one = len(kept)
    taken_1, taken_3 = (one,), (one, one, one)  # the free lists' last 1-tuple and 3-tuple
    gc.callbacks.append(record)  # from here, nothing but the pause allocates
    token = pause_collector()
    resume_collector(token)
    gc.callbacks.remove(record)
    assert started == []
    assert len(taken_1) + len(taken_3) == 4
