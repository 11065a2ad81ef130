"""Automatic garbage collection paused for the length of one bulk call.

Freezing, loading and rebuilding a plan builds hundreds of thousands of small dicts and
specs and frees almost none of them, and none forms a cycle. Each 700 new containers
start a young collection, and every so often a full one walks the whole heap (torch's
included), so collection time grows with the plan: measured in `make bench`
(benchmarks/paths.py, "no pause" columns), it is most of the time of a large read with
the collector on. Pausing it for one call skips those passes; what the call built is
collected once, later, like anything else the caller keeps, or freed by reference count
if the caller drops it first.

The pause never touches ``gc.isenabled()``: that switch is the program's, and another
thread may flip it while a call runs (toggling it here undid such a ``gc.disable()``).
It sets the first generation's threshold to 0 instead, which ``gc.set_threshold``
documents as "automatic collection off", and puts the saved threshold back when the last
pause in the process ends, unless the program set another one meanwhile. Pauses nest and
overlap across threads: a count under a lock decides which one is last. ``gc.collect()``
works as ever, and other threads are not collected automatically while any pause lasts;
``gc.get_threshold()`` reads ``0`` during a pause.

The pause is a pair of calls, not a ``with`` block, and allocates no object the
collector tracks while a collection could still start: after a paused call the young
generation holds all that call built, so one such allocation would collect all of it at
once (entering a ``with`` allocates its bound ``__exit__``: at 10k modules, about 2 us a
module inside ``dump_meta(freeze_plan(plan))``). Reading and setting the threshold build
a 3-tuple and a 1-tuple; the pause first drops one of each it kept from the last pause,
so CPython's tuple free lists hand them straight back and no allocation is counted.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.RLock()  # reentrant: a signal handler may pause in the middle of a pause
_pauses = 0
# The thresholds found by the outermost pause (kept as the 3-tuple gc gave), and a
# 1-tuple to drop before gc.set_threshold builds its argument tuple: see the docstring.
_saved: tuple[int, ...] = gc.get_threshold()
_spare: tuple[int, ...] = (_pauses,)


def pause_collector() -> bool:
    """Stop automatic collection until the matching resume_collector; return True, the
    value to hand to it. Call resume_collector in a ``finally``.

    The caller's ``gc.isenabled()`` is not touched, and another thread's pause or
    ``gc.disable()`` meanwhile keeps its effect.
    """
    global _pauses, _saved, _spare
    _lock.acquire()
    try:
        _pauses += 1  # first: a reentrant pause in between sees it and leaves the rest
        if _pauses == 1:
            _saved = _spare = ()  # hand both tuples back to the free lists, then:
            _saved = gc.get_threshold()
            gc.set_threshold(0)
    finally:
        _lock.release()
    return True


def resume_collector(paused: bool) -> None:
    """End the pause that pause_collector began (``paused`` is what it returned). The
    last pause to end restores the thresholds, unless the program set its own meanwhile."""
    global _pauses, _spare
    if not paused:
        return
    _lock.acquire()
    try:
        if _pauses == 1:  # restore before counting down, as pause counts up first
            if gc.get_threshold()[0] == 0:  # still ours (and at 0 no allocation collects)
                _spare = (_pauses,)  # for the next pause to drop
                gc.set_threshold(_saved[0])
        if _pauses > 0:
            _pauses -= 1
    finally:
        _lock.release()
