"""Automatic garbage collection paused for the length of one bulk call.

Freezing, loading and rebuilding a plan builds hundreds of thousands of small dicts and
specs and frees almost none of them, and none forms a cycle. Each 700 new containers
start a young collection, and every so often a full one walks the whole heap (torch's
included), so collection time grows with the plan: measured in `make bench`
(benchmarks/paths.py, "no pause" columns), it is most of the time of a large read with
the collector on. Pausing it for one call skips those passes; what the call built is
collected once, later, like anything else the caller keeps, or freed by reference count
if the caller drops it first.

The pause is a pair of calls, not a ``with`` block: entering a ``with`` allocates a
bound ``__exit__`` method, a tracked object, and after a paused call the young generation
holds all that call built, so that one allocation would collect all of it at once (at
10k modules, about 2 us a module inside ``dump_meta(freeze_plan(plan))``).
"""

from __future__ import annotations

import gc


def pause_collector() -> bool:
    """Disable automatic collection; return whether it was on, for resume_collector.

    The switch is per process: another thread running meanwhile is not collected
    automatically either, until the matching resume_collector.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    return was_enabled


def resume_collector(was_enabled: bool) -> None:
    """Restore what pause_collector found: call it in a ``finally``. A caller that had
    disabled the collector itself keeps it off."""
    if was_enabled:
        gc.enable()
