"""`shardplan show` and `diff` on the 100,003-module bench plan, as a user runs them.

Each command is a fresh process (interpreter start, imports, the read, the output to a
file), timed against the floor measured in the same rounds: a fresh process that only
runs ``load_meta`` on the same file, which every command pays once (``diff`` twice).
Rounds interleave the commands, so machine noise hits all alike; medians. The bound the
commands are held to is 2 s each (docs/cli.md), wall time; it is reported, not enforced,
since a shared machine's load moves it. Beside the wall time, the CPU time the command's
processes used (user and system, ``diff``'s two readers together): on a loaded machine it
is nearer what the command takes on an idle one, and the load average is stated.

``python -m benchmarks.review`` runs it alone.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAYERS = 25_000  # 100,003 modules
BOUND_S = 2.0
ROUNDS = 3
_FLOOR = "import sys; from shardplan import load_meta; load_meta(sys.argv[1])"


def edited_copy(artifact: Path, folder: Path) -> Path:
    """The artifact with one placement changed and one module added: a planner's change."""
    document = json.loads(artifact.read_text())
    modules = document["param_plan"]
    first = next(fqn for fqn in sorted(modules) if modules[fqn].get("params"))
    params = modules[first]["params"]
    axis_map = params[sorted(params)[0]]
    axis = sorted(axis_map)[0]
    axis_map[axis] = "R" if axis_map[axis] != "R" else "S(0)"
    modules["model.extra"] = {"params": {"weight": {axis: "S(0)"}}}
    edited = folder / "edited.json"
    edited.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return edited


def run(artifact: Path) -> dict[str, Any]:
    """Median wall seconds of each command and of the floor, and each one's ratio to it."""
    with tempfile.TemporaryDirectory(prefix="specgen-bench-review-") as name:
        folder = Path(name)
        edited = edited_copy(artifact, folder)
        python = [sys.executable]
        commands = {
            "load_meta alone (floor)": [*python, "-c", _FLOOR, str(artifact)],
            "show": [*python, "-m", "shardplan", "show", str(artifact)],
            "show --collapse": [*python, "-m", "shardplan", "show", "--collapse", str(artifact)],
            "show --html": [
                *python,
                *("-m", "shardplan", "show", str(artifact), "--html", str(folder / "p.html")),
            ],
            "diff": [*python, "-m", "shardplan", "diff", str(artifact), str(edited)],
        }
        samples: dict[str, list[float]] = {label: [] for label in commands}
        cpu: dict[str, list[float]] = {label: [] for label in commands}
        load = [os.getloadavg()[0]]  # other programs on the machine: stated with the figures
        for _ in range(ROUNDS):
            for label, argv in commands.items():
                with open(folder / "out.txt", "wb") as out:
                    used = _cpu_of_children()
                    start = time.perf_counter()
                    done = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.PIPE)
                    samples[label].append(time.perf_counter() - start)
                    cpu[label].append(_cpu_of_children() - used)
                if done.returncode not in (0, 1):
                    sys.exit(f"bench: {label} failed: {done.stderr.decode()}")
        load.append(os.getloadavg()[0])
    medians = {label: statistics.median(values) for label, values in samples.items()}
    floor = medians["load_meta alone (floor)"]
    return {
        "modules": len(json.loads(artifact.read_text())["param_plan"]),
        "artifact_bytes": artifact.stat().st_size,
        "bound_s": BOUND_S,
        "seconds": medians,
        "cpu_seconds": {label: statistics.median(values) for label, values in cpu.items()},
        "x_floor": {label: seconds / floor for label, seconds in medians.items()},
        "load": load,
    }


def _cpu_of_children() -> float:
    """User and system seconds of the children waited for so far (a child's own waited
    children included: diff's second reader)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def report(result: dict[str, Any]) -> None:
    """Print the table."""
    start, end = result["load"]
    print(
        f"shardplan on {result['modules']:,} modules ({result['artifact_bytes'] / 2**20:.1f} "
        f"MiB), fresh processes, median of {ROUNDS}, load average {start:.1f} to {end:.1f}:"
    )
    for label, seconds in result["seconds"].items():
        held = ""
        if not label.startswith("load_meta"):
            held = "  held" if seconds <= result["bound_s"] else f"  over {result['bound_s']:g} s"
        print(
            f"  {label:<24} {seconds:6.2f} s  {result['x_floor'][label]:5.2f}x the floor  "
            f"cpu {result['cpu_seconds'][label]:5.2f} s{held}"
        )


def page_lines(result: dict[str, Any]) -> list[str]:
    """The section of docs/bench-results.md."""
    start, end = result["load"]
    lines = [
        "",
        f"## shardplan show and diff, {result['modules']:,} modules",
        "",
        f"Fresh processes on the bench plan's {result['artifact_bytes'] / 2**20:.1f} MiB "
        f"artifact, median of {ROUNDS}; the floor is a process that only runs `load_meta` on "
        f"it. Bound: {result['bound_s']:g} s each, wall time. CPU: user and system seconds of "
        f"the command's processes. Load average {start:.1f} at the start of these rounds and "
        f"{end:.1f} at the end.",
        "",
        "| command | s | x the floor | cpu s |",
        "|---|---:|---:|---:|",
    ]
    for label, seconds in result["seconds"].items():
        lines.append(
            f"| {label} | {seconds:.2f} | {result['x_floor'][label]:.2f} "
            f"| {result['cpu_seconds'][label]:.2f} |"
        )
    return lines


if __name__ == "__main__":
    from benchmarks.plans import llama_plan
    from shardplan import write_plan

    with tempfile.TemporaryDirectory(prefix="specgen-bench-") as name:
        path = Path(name) / "codegen_meta.json"
        write_plan(llama_plan(LAYERS), path)
        report(run(path))
