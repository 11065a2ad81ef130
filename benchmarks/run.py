"""`make bench`: what users feel, then generated vs reference vs hand-written, side by side.

1. benchmarks/paths.py: writing and reading an artifact through the public API at about
   1k, 10k and 100k modules with the collector on, against the floor, per module, with
   peak memory and the growth from the smallest size to the largest.
2. benchmarks/codec_choice.py: the JSON codecs measured for the choice of orjson to write
   and msgspec to read.
3. Freeze and rebuild alone, collector off: generated vs the table-driven reference vs
   the fastest hand-written version (the generated code's goal: within 5%, 1.05x).
4. benchmarks/review.py: `shardplan show` and `diff` on the 100,003-module plan, fresh
   processes, against a process that only loads the artifact.
5. With --huge, about 500k modules: load + rebuild time and peak RSS, each in a fresh
   process; with --before REV as well, the same run on the tree at REV (a git worktree).

Every implementation is timed in the same process, interleaved round by round after a
warm-up, and reported as a median, so machine noise hits all of them alike. Outputs
are compared before anything is timed. Results go to stdout, benchmarks/results.json (not
committed) and docs/bench-results.md, the tables docs/performance.md links to (committed:
every figure the docs give comes from it). A read peak above its bound
(benchmarks/paths.py, READ_PEAK_BOUND) makes the run exit 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import codec_choice, handwritten, paths, review
from benchmarks.paths import rotated
from benchmarks.plans import TRUSTED_TARGETS, llama_plan
from generator.cache import FOLDER as CACHE_FOLDER
from shardplan import api, reference
from shardplan.artifact.meta import dump_meta, meta_from_json, meta_to_json
from shardplan.staleness import check_generated
from shardplan.table import plan_fields, spec_fields

ROOT = Path(__file__).resolve().parents[1]
RESULTS_PAGE = ROOT / "docs" / "bench-results.md"
CHECK_BOUND_S = 0.5  # `make check` on an up-to-date checkout, two idle cores (issue 52)
SIZES = {8: 301, 80: 61, 800: 9}  # layers -> timed rounds
GENERATED_GOAL = 1.05  # generated freeze and rebuild within 5% of the hand-written code
# Each module exposes freeze_param_plan, freeze_injections and rebuild_live_plan_from_meta.
IMPLEMENTATIONS = {"generated": api, "reference": reference, "hand-written": handwritten}


def _freeze(module: Any) -> Callable[[Any], Any]:
    return lambda plan: (module.freeze_param_plan(plan), module.freeze_injections(plan))


def _rebuild(module: Any) -> Callable[[Any], Any]:
    return lambda meta: module.rebuild_live_plan_from_meta(meta, allow_targets=TRUSTED_TARGETS)


def side_by_side(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds per call, interleaving the calls round by round, each round starting
    one call further on (paths.rotated): no call always runs first."""
    for call in calls.values():  # warm-up: caches, first-use imports
        call()
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    gc.disable()  # collection pauses would land on whichever call was running
    try:
        for round_ in range(rounds):
            for name in rotated(list(calls), round_):
                start = time.perf_counter()
                calls[name]()
                samples[name].append(time.perf_counter() - start)
    finally:
        gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}


def check_same_outputs(plan: Any, meta: Any) -> None:
    """All implementations must agree before their speed means anything."""
    frozen = {name: json.dumps(_freeze(m)(plan)) for name, m in IMPLEMENTATIONS.items()}
    rebuilt = {name: repr(_rebuild(m)(meta).modules) for name, m in IMPLEMENTATIONS.items()}
    for what, outputs in (("freeze", frozen), ("rebuild", rebuilt)):
        if len(set(outputs.values())) != 1:
            sys.exit(
                f"bench: {what} outputs differ between {sorted(outputs)}; benchmarks/handwritten.py "
                "may be stale for the current table"
            )


def peak_bytes(call: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def command_wall(
    argv: list[str], runs: int = 5, before: Callable[[], object] = lambda: None
) -> float:
    """Median wall seconds of a whole command (``before`` runs, untimed, before each)."""
    walls = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


# Peak RSS is read inside the generator's own process from VmHWM (reset at exec): the
# rusage maxrss of a child carries over the RSS of this torch-importing process it was
# forked from. The command does its work in a child it forks (generator/supervise.py),
# whose maxrss that process reads once it has waited for it: the larger of the two.
_PEAK_RSS = (
    "import resource, runpy, sys; sys.argv = ['generator', *sys.argv[1:]]\n"
    "try: runpy.run_module('generator', run_name='__main__')\n"
    "except SystemExit: pass\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
    "child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(max(int(hwm.split()[1]), child), file=sys.stderr)"
)


def generator_peak_rss_mib(*args: str) -> float:
    """Peak resident memory of one generator run, in MiB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *args], cwd=ROOT, capture_output=True, text=True
    )
    return int(done.stderr.strip().splitlines()[-1]) / 1024


def bench_size(layers: int, rounds: int) -> dict[str, Any]:
    plan = llama_plan(layers)
    meta = reference.freeze_plan(plan)
    check_same_outputs(plan, meta)
    text = meta_to_json(meta)
    freezers = {n: _freeze(m) for n, m in IMPLEMENTATIONS.items()}
    rebuilders = {n: _rebuild(m) for n, m in IMPLEMENTATIONS.items()}
    freeze = side_by_side({n: (lambda f=f: f(plan)) for n, f in freezers.items()}, rounds)
    rebuild = side_by_side({n: (lambda r=r: r(meta)) for n, r in rebuilders.items()}, rounds)
    json_io = side_by_side(
        {"dump": lambda: meta_to_json(meta), "load": lambda: meta_from_json(text)}, rounds
    )
    return {
        "layers": layers,
        "modules": len(plan.modules),
        "artifact_bytes": len(text.encode()),
        "freeze_s": freeze,
        "rebuild_s": rebuild,
        "json_s": json_io,
        "peak_bytes": {
            "generated freeze": peak_bytes(lambda: api.freeze_plan(plan)),
            "generated rebuild": peak_bytes(
                lambda: api.rebuild_live_plan_from_meta(meta, allow_targets=TRUSTED_TARGETS)
            ),
        },
    }


# Run in a fresh process on one tree (PYTHONPATH): load + rebuild one artifact.
_HUGE_READ = r"""
import inspect, json, sys, time
from shardplan import api
from shardplan.artifact.meta import load_meta
# The plans' two Targets, exactly; the code at --before REV may predate allow_targets.
trusted = {"allow_targets": ("models.llama.cp.flash_attention_cp_wrapper",
                             "models.llama.ep.grouped_gemm_compute")}
if "allow_targets" not in inspect.signature(api.rebuild_plan).parameters:
    trusted = {}
start = time.perf_counter()
meta = load_meta(sys.argv[1])
loaded = time.perf_counter()
plan = api.rebuild_plan(meta, **trusted)
done = time.perf_counter()
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"load_s": loaded - start, "rebuild_s": done - loaded,
                  "modules": len(plan.modules), "peak_rss_mib": int(hwm.split()[1]) / 1024}))
"""


def huge_read(tree: Path, artifact: Path) -> dict[str, Any]:
    """Load + rebuild ``artifact`` with the code of ``tree``, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", _HUGE_READ, str(artifact)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"bench: the huge read on {tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_huge(folder: Path, before: str | None) -> dict[str, Any]:
    """About 500k modules: write once (timed), then read here and, if asked, at ``before``."""
    plan = llama_plan(paths.HUGE_LAYERS)
    artifact = folder / "huge.json"
    start = time.perf_counter()
    paths.write_user(plan, artifact)
    result: dict[str, Any] = {
        "modules": len(plan.modules),
        "artifact_bytes": artifact.stat().st_size,
        "write_s": time.perf_counter() - start,
    }
    del plan
    gc.collect()
    result["after"] = huge_read(ROOT, artifact)
    if before:
        tree = folder / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), before],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            result["before"] = {"rev": before, **huge_read(tree, artifact)}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    return result


def report_huge(huge: dict[str, Any]) -> None:
    print(
        f"\n{huge['modules']} modules, artifact {huge['artifact_bytes'] / 2**20:.0f} MiB: "
        f"write {huge['write_s']:.1f} s"
    )
    for label in ("before", "after"):
        if label in huge:
            r = huge[label]
            print(
                f"  {label + (' (' + r['rev'] + ')' if 'rev' in r else ''):<20} load "
                f"{r['load_s']:6.1f} s + rebuild {r['rebuild_s']:6.1f} s = "
                f"{r['load_s'] + r['rebuild_s']:6.1f} s, peak RSS {r['peak_rss_mib']:7.0f} MiB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__.splitlines()[0])
    parser.add_argument("--huge", action="store_true", help="also about 500k modules")
    parser.add_argument("--before", metavar="REV", help="with --huge: the same read at REV")
    args = parser.parse_args()
    if args.before and not args.huge:
        parser.error("--before compares the --huge run: give --huge too")
    stale = handwritten.not_for_these_tables()
    if stale:  # the floor every ratio is measured against is not there for these tables
        sys.exit(f"bench: {stale}; there is nothing to time the generated code against")
    results: dict[str, Any] = {"python": sys.version.split()[0], "sizes": []}
    load_at_start = os.getloadavg()[0]  # other programs on the machine: stated with the figures
    results["paths"] = paths.run()
    paths.report(results["paths"])
    with tempfile.TemporaryDirectory(prefix="specgen-bench-") as folder:
        artifact = Path(folder) / "codegen_meta.json"
        dump_meta(api.freeze_plan(llama_plan(25000)), artifact)
        results["codecs"] = codec_choice.run(artifact)
        print()
        codec_choice.report(results["codecs"])
        results["review"] = review.run(artifact)
        print()
        review.report(results["review"])
        if args.huge:
            results["huge"] = bench_huge(Path(folder), args.before)
            report_huge(results["huge"])
    print()
    for layers, rounds in SIZES.items():
        results["sizes"].append(bench_size(layers, rounds))
    digests = {table.__name__: table.table_digest() for table in (spec_fields, plan_fields)}
    guard_s = (
        min(
            timeit.repeat(lambda: check_generated("generated/x.py", digests), number=1000, repeat=5)
        )
        / 1000
    )
    results["staleness_guard_s"] = guard_s
    # What `make codegen` and `make check` run, with this interpreter (make bench's venv).
    results["make_codegen"] = {
        "wall_s": command_wall([sys.executable, "-m", "generator", "generate"]),
        "peak_rss_mib": generator_peak_rss_mib(),
    }
    # An up-to-date checkout's check, its cache warm (generate above filled it), held to
    # CHECK_BOUND_S; and cold, the cache removed before each run (a fresh clone's first).
    check = [sys.executable, "-m", "generator", "check"]
    results["make_check"] = {
        "wall_s": command_wall(check),
        "cold_wall_s": command_wall(
            check, runs=3, before=lambda: shutil.rmtree(ROOT / CACHE_FOLDER, ignore_errors=True)
        ),
        "peak_rss_mib": generator_peak_rss_mib("--check"),
    }
    results["make_check"]["held"] = results["make_check"]["wall_s"] <= CHECK_BOUND_S
    results["machine"] = {**machine(), "load": [load_at_start, os.getloadavg()[0]]}
    report(results)
    (ROOT / "benchmarks" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    RESULTS_PAGE.write_text(results_page(results, huge=args.huge))
    print(f"\nwrote {RESULTS_PAGE.relative_to(ROOT)}")
    if not results["make_check"]["held"]:
        sys.exit(f"bench: make check above its bound of {CHECK_BOUND_S} s")
    exceeded = [p for p in results["paths"]["read_peaks"] if not p["held"]]
    if exceeded:
        sys.exit(
            "bench: read peak above its bound: "
            + "; ".join(
                f"{p['plan']}, {p['modules']} modules, {p['times_file']:.1f}x" for p in exceeded
            )
        )


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import platform

    import torch

    return {
        "cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.machine()}",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
    }


def results_page(results: dict[str, Any], *, huge: bool) -> str:
    """docs/bench-results.md: the run's figures as Markdown tables."""
    m = results["machine"]
    us = lambda seconds, modules: f"{seconds / modules * 1e6:.2f}"  # noqa: E731
    lines = [
        "# Benchmark results",
        "",
        "<!-- Written by `make bench` (benchmarks/run.py). DO NOT EDIT: run `make bench` and "
        "commit this file. -->",
        "",
        f"One run of `make bench`{' --huge' if huge else ''} on {m['cores']} cores "
        f"({m['system']}, Python {m['python']}, torch {m['torch']}, CPU), load average "
        f"{m['load'][0]:.1f} at the start and {m['load'][1]:.1f} at the end (the machine is "
        "shared). Medians of interleaved rounds, microseconds a module. [How to read "
        "them](performance.md).",
        "",
        "## Writing and reading an artifact",
        "",
        "write: `write_plan(plan, path)`; read: `read_plan(path)`; floor: the hand-written "
        "freeze/rebuild with `json.dumps`/`json.loads`, under the same collector pause as the "
        "user path; pair: `dump_meta(freeze_plan(plan), path)`, `rebuild_plan(load_meta(path))`.",
        "",
        "| modules | | user | floor | ratio | pair | pair / floor | user, no pause "
        "| user, collector off | floor, collector off | peak, x the file |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in results["paths"]["sizes"]:
        n = size["modules"]
        for direction in ("write", "read"):
            t = size[direction]
            peak = size[f"{direction}_peak_bytes"]["user"] / size["artifact_bytes"]
            lines.append(
                f"| {n:,} | {direction} | {us(t['user'], n)} | {us(t['floor'], n)} "
                f"| {t['user'] / t['floor']:.2f} | {us(t['pair'], n)} "
                f"| {t['pair'] / t['floor']:.2f} | {us(t['user, no pause'], n)} "
                f"| {us(t['user, collector off'], n)} | {us(t['floor, collector off'], n)} "
                f"| {peak:.1f} |"
            )
    lines += [
        "",
        "The atomic, fsynced file write both sides pay, a module: "
        + ", ".join(
            f"{us(s['file_write_s']['atomic, fsynced'], s['modules'])} at {s['modules']:,}"
            for s in results["paths"]["sizes"]
        )
        + ".",
        "",
        "## Read peak against its bound",
        "",
        "Peak traced memory of `read_plan(path)`, as a multiple of the file. "
        "The bench exits 1 when a peak is above its bound.",
        "",
        "| plan | modules | file, MiB | read peak, x the file | bound | |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in results["paths"]["read_peaks"]:
        lines.append(
            f"| {p['plan']} | {p['modules']:,} | {p['artifact_bytes'] / 2**20:.2f} "
            f"| {p['times_file']:.1f} | {p['bound']} | {'held' if p['held'] else 'EXCEEDED'} |"
        )
    lines += [
        "",
        "## read_plan against the floor",
        "",
        f"Both under the collector pause; the goal ({paths.READ_RATIO_GOAL}x) applies from "
        f"{paths.READ_RATIO_FROM_MODULES:,} modules. Reported, not enforced: times move with "
        "the load stated above.",
        "",
        "| modules | read_plan / floor | goal | |",
        "|---:|---:|---:|---|",
    ]
    for r in results["paths"]["read_ratios"]:
        goal = "" if r["goal"] is None else f"{r['goal']}"
        verdict = "" if r["goal"] is None else ("held" if r["held"] else "MISSED")
        lines.append(f"| {r['modules']:,} | {r['ratio']:.2f} | {goal} | {verdict} |")
    codecs = results["codecs"]
    lines += [
        "",
        f"## JSON codecs, on a {codecs['artifact_bytes'] / 2**20:.1f} MiB artifact",
        "",
        "Each in a fresh process without torch, best of 3; peak RSS above the process's.",
        "",
        "| | codec | ms | peak, MiB | the format's bytes |",
        "|---|---|---:|---:|---|",
    ]
    for step in ("decode", "encode"):
        for variant, r in codecs[step].items():
            same = {True: "yes", False: "no"}.get(r.get("same_bytes"), "")
            lines.append(
                f"| {step} | {variant} | {r['seconds'] * 1e3:.1f} | {r['peak_mib']:.1f} | {same} |"
            )
    lines += review.page_lines(results["review"])
    if huge:
        h = results["huge"]
        lines += [
            "",
            f"## About 500k modules ({h['modules']:,}, {h['artifact_bytes'] / 2**20:.0f} MiB)",
            "",
            f"Write {h['write_s']:.1f} s. Load and rebuild, each in a fresh process:",
            "",
            "| tree | load, s | rebuild, s | peak RSS, MiB |",
            "|---|---:|---:|---:|",
        ]
        for label in ("before", "after"):
            if label in h:
                r = h[label]
                tree = "the `--before` revision" if label == "before" else "this tree"
                lines.append(
                    f"| {tree} | {r['load_s']:.1f} | {r['rebuild_s']:.1f} "
                    f"| {r['peak_rss_mib']:.0f} |"
                )
    lines += [
        "",
        "## Freeze and rebuild alone",
        "",
        "Collector off; generated code against the table-driven reference and the hand-written "
        f"version (goal: gen / hand-written at most {GENERATED_GOAL}).",
        "",
        "| modules | | generated, us a module | gen / reference | gen / hand-written |",
        "|---:|---|---:|---:|---:|",
    ]
    for size in results["sizes"]:
        for direction in ("freeze", "rebuild"):
            t = size[f"{direction}_s"]
            lines.append(
                f"| {size['modules']:,} | {direction} | {us(t['generated'], size['modules'])} "
                f"| {t['generated'] / t['reference']:.2f} "
                f"| {t['generated'] / t['hand-written']:.2f} |"
            )
    gen, check = results["make_codegen"], results["make_check"]
    lines += [
        "",
        "## The generator",
        "",
        f"`make codegen` {gen['wall_s']:.2f} s wall (median of 5), peak RSS "
        f"{gen['peak_rss_mib']:.0f} MiB; `make check` {check['wall_s']:.2f} s on an up-to-date "
        f"checkout (bound {CHECK_BOUND_S} s: {'held' if check['held'] else 'MISSED'}; "
        f"{check['cold_wall_s']:.2f} s with its cache removed), "
        f"{check['peak_rss_mib']:.0f} MiB. The staleness guard: "
        f"{results['staleness_guard_s'] * 1e6:.1f} us an import.",
        "",
    ]
    return "\n".join(lines)


def report(results: dict[str, Any]) -> None:
    ms = lambda s: f"{s * 1e3:9.3f}"  # noqa: E731
    print(
        f"{'layers':>6} {'modules':>7} {'direction':<8} {'generated':>10} {'reference':>10} "
        f"{'hand':>10} {'gen/ref':>8} {'gen/hand':>8} {'us/module':>9}   (medians, ms)"
    )
    for size in results["sizes"]:
        for direction in ("freeze", "rebuild"):
            t = size[f"{direction}_s"]
            print(
                f"{size['layers']:>6} {size['modules']:>7} {direction:<8} {ms(t['generated'])} "
                f"{ms(t['reference'])} {ms(t['hand-written'])} "
                f"{t['generated'] / t['reference']:8.3f} {t['generated'] / t['hand-written']:8.3f} "
                f"{t['generated'] / size['modules'] * 1e6:9.2f}"
            )
    print()
    for size in results["sizes"]:
        j, peak = size["json_s"], size["peak_bytes"]
        print(
            f"{size['layers']:>4} layers: artifact {size['artifact_bytes'] / 1024:8.1f} KiB, json dump "
            f"{ms(j['dump'])} ms, load {ms(j['load'])} ms; peak alloc freeze "
            f"{peak['generated freeze'] / 2**20:6.2f} MiB, rebuild {peak['generated rebuild'] / 2**20:6.2f} MiB"
        )
    print(f"\nstaleness guard: {results['staleness_guard_s'] * 1e6:.1f} us per import")
    for name in ("make_codegen", "make_check"):
        r = results[name]
        print(
            f"{name.replace('_', ' ')}: {r['wall_s']:.3f} s wall (median of 5), peak RSS {r['peak_rss_mib']:.0f} MiB"
        )


if __name__ == "__main__":
    main()
