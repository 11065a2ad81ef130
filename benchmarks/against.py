"""What users feel, here and at another commit, side by side in one run.

    python -m benchmarks.against REV [--layers 2500] [--pairs 6] [--rounds 5]

Writes (``write_plan(plan, path)`` where the tree has it, which writes the bytes of
``dump_meta(freeze_plan(plan), path)``, checked; else that pair) and reads (``rebuild_plan(load_meta(path))``)
the same Llama-style plan through the public API, collector on, in fresh processes: one
on this checkout, one on REV checked out in a temporary git worktree, alternating pair by
pair so that the machine's drift falls on both. Each process imports only its own tree
(``python -S`` with that tree first on the path: an editable install of this checkout
would otherwise stand in for REV). Prints medians in microseconds a module and the ratio
now / REV; `make bench` reports against the hand-written floor instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The two paths users feel, and their steps: write = freeze + dump, read = load + rebuild.
DIRECTIONS = ("write", "read", "freeze", "dump", "load", "rebuild")
SITE_PACKAGES = [
    entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")
]

# Run in each tree. rebuild_plan is given an allow-list where it takes one: the plan's two
# Targets by their exact paths, which both trees read the same way.
_PROBE = r"""
import inspect, json, statistics, sys, tempfile, time
from pathlib import Path
from benchmarks.plans import llama_plan
from shardplan import api
from shardplan.artifact.meta import dump_meta, load_meta
layers, rounds = int(sys.argv[1]), int(sys.argv[2])
plan = llama_plan(layers)
path = Path(tempfile.mkdtemp()) / "codegen_meta.json"
trust = {"allow_targets": ("models.llama.cp.flash_attention_cp_wrapper",
                           "models.llama.ep.grouped_gemm_compute")}
if "allow_targets" not in inspect.signature(api.rebuild_plan).parameters:
    trust = {}
steps = {"freeze": [], "dump": [], "load": [], "rebuild": [], "write_plan": []}
one_call = getattr(api, "write_plan", None)  # the one-call write, where the tree has it
for _ in range(rounds + 1):  # the first round warms caches and is dropped
    if one_call is not None:
        t0 = time.perf_counter()
        one_call(plan, path)
        steps["write_plan"].append(time.perf_counter() - t0)
        written = path.read_bytes()
    t0 = time.perf_counter()
    meta = api.freeze_plan(plan)
    t1 = time.perf_counter()
    dump_meta(meta, path)
    t2 = time.perf_counter()
    loaded = load_meta(path)
    t3 = time.perf_counter()
    api.rebuild_plan(loaded, **trust)
    t4 = time.perf_counter()
    for step, taken in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
        steps[step].append(taken)
    if one_call is not None and written != path.read_bytes():
        raise SystemExit("write_plan wrote other bytes than dump_meta(freeze_plan(plan))")
median = {step: statistics.median(taken[1:]) for step, taken in steps.items() if taken}
write = median["write_plan"] if one_call else median["freeze"] + median["dump"]
print(json.dumps({"modules": len(plan.modules), **median, "write": write,
                  "read": median["load"] + median["rebuild"]}))
"""


def run_in_tree(tree: Path, script: str, *args: object) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter that imports only ``tree`` (and the installed
    packages); its standard output is one JSON object."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *SITE_PACKAGES])}
    result = subprocess.run(
        [sys.executable, "-S", "-c", script, *map(str, args)],
        cwd=tree,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"benchmark at {tree} failed:\n{result.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(result.stdout)
    return measured


@contextlib.contextmanager
def checked_out(rev: str) -> Iterator[Path]:
    """``rev`` in a temporary git worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="specgen-against-") as folder:
        tree = Path(folder) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def compare(rev: str, layers: int, pairs: int, rounds: int) -> dict[str, Any]:
    """Medians over ``pairs`` alternating process pairs, each of ``rounds`` rounds."""
    runs: dict[str, list[dict[str, Any]]] = {"now": [], rev: []}
    with checked_out(rev) as tree:
        for _ in range(pairs):
            runs["now"].append(run_in_tree(ROOT, _PROBE, layers, rounds))
            runs[rev].append(run_in_tree(tree, _PROBE, layers, rounds))
    modules = runs["now"][0]["modules"]
    return {
        "rev": rev,
        "modules": modules,
        **{
            side: {d: statistics.median(r[d] for r in found) for d in DIRECTIONS}
            for side, found in runs.items()
        },
    }


def report(results: dict[str, Any]) -> None:
    rev, modules = results["rev"], results["modules"]
    print(f"{modules} modules, public API, collector on; microseconds a module (medians)")
    print(f"{'path':<8} {rev:>12} {'now':>12} {'now / ' + rev:>16}")
    for direction in DIRECTIONS:
        before, now = results[rev][direction], results["now"][direction]
        print(
            f"{direction:<8} {before / modules * 1e6:12.2f} {now / modules * 1e6:12.2f} "
            f"{now / before:16.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit to compare with (e.g. main's last landing)")
    parser.add_argument("--layers", type=int, default=2500, help="about 4 modules a layer")
    parser.add_argument("--pairs", type=int, default=6, help="alternating process pairs")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds a process")
    args = parser.parse_args()
    report(compare(args.rev, args.layers, args.pairs, args.rounds))


if __name__ == "__main__":
    main()
