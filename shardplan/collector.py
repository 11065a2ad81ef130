"""Automatic garbage collection paused for the length of one bulk call.

Freezing, loading and rebuilding a plan builds hundreds of thousands of small dicts and
specs and frees almost none of them, and none forms a cycle. Each 700 new containers
start a young collection, and every so often a full one walks the whole heap (torch's
included), so collection time grows with the plan: measured in `make bench`
(benchmarks/gc_cost.py), it is most of the time of a large read with the collector on.
Pausing it for one call skips those passes; what the call built is collected once, later,
like anything else the caller keeps.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable automatic collection inside the block and restore the caller's setting after
    it, on success and on error alike. A caller that disabled it already keeps it off.

    The switch is per process: another thread running meanwhile is not collected
    automatically either, for the length of the call.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
