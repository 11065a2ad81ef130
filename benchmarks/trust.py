"""What the trust rule costs a user: rebuilding a plan's artifact under each form of
allow-list entry, here and at another commit, side by side in one run.

    python -m benchmarks.trust REV [--layers 250] [--pairs 4] [--rounds 15]
                                   [--distributions 400]

The Llama-style bench plan (benchmarks/plans.py) names two callables of a package the
program owns (``models.llama``), laid out as source in a temporary folder on ``sys.path``.
Each fresh process, one per tree and entry form, alternating tree by tree, rebuilds its
artifact with ``rebuild_plan(meta, allow_targets=...)`` through the public API, collector
on: the first rebuild of the process (what a trainer rank does once, reading the
allow-list and the import system and metadata that say whose code a package is) and the
median of the later ones. Then, in fresh processes too, the first read's lookup of whose
code ``models`` is (``owners.library_of``, after importing the runtime as a trainer has),
with the package alone in its folder and beside ``--distributions`` distributions laid
out as ``pip install --target`` leaves them (the most this lookup reads there). Prints
milliseconds and the ratio now / REV.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks.against import ROOT, checked_out, run_in_tree

FORMS = ("exact", "module", "subtree", "mapping")

# The program's own package the plan's Targets name, as source in a folder on sys.path;
# ``count`` distributions beside it, as pip install --target lays them out.
_SOURCE = r"""
import sys, tempfile
from pathlib import Path

def lay_out_source(count):
    root = Path(tempfile.mkdtemp())
    files = {
        "models/__init__.py": "",
        "models/llama/__init__.py": "",
        "models/llama/cp.py": "def flash_attention_cp_wrapper(**kwargs):\n    return kwargs\n",
        "models/llama/ep.py": "def grouped_gemm_compute(**kwargs):\n    return kwargs\n",
    }
    for index in range(count):
        name = f"dist{index:04d}"
        info = f"{name}-1.0.dist-info"
        files[f"{name}/__init__.py"] = ""
        files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        files[f"{info}/INSTALLER"] = "pip\n"
        files[f"{info}/RECORD"] = "".join(
            f"{name}/module{n}.py,sha256=0000000000000000000000000000000000000000000,100\n"
            for n in range(40)
        )
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    sys.path.insert(0, str(root))
"""

_PROBE = _SOURCE + r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
from benchmarks.plans import TRUSTED_TARGETS, llama_plan
from shardplan import api
from shardplan.artifact.meta import dump_meta, load_meta
lay_out_source(0)

def implementation(*args, **kwargs):
    return args, kwargs

layers, rounds, form = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
allow = {
    "exact": TRUSTED_TARGETS,
    "module": tuple(sorted({path.rpartition(".")[0] for path in TRUSTED_TARGETS})),
    "subtree": ("models.*",),
    "mapping": ({path: implementation for path in TRUSTED_TARGETS},),
}[form]
plan = llama_plan(layers)
path = Path(tempfile.mkdtemp()) / "codegen_meta.json"
dump_meta(api.freeze_plan(plan), path)
meta = load_meta(path)
taken = []
for _ in range(rounds + 1):
    t0 = time.perf_counter()
    rebuilt = api.rebuild_plan(meta, allow_targets=allow)
    taken.append(time.perf_counter() - t0)
assert rebuilt.modules == plan.modules
print(json.dumps({"modules": len(plan.modules), "first": taken[0],
                  "later": statistics.median(taken[1:])}))
"""

# A fresh process's first lookup of whose code the entries' package is, once the runtime
# is imported (as a trainer's is before its first read).
_LOOKUP_PROBE = _SOURCE + r"""
import json, time
from shardplan import api
from shardplan.convert import owners
lay_out_source(int(sys.argv[1]))
t0 = time.perf_counter()
why = owners.library_of("models")
taken = time.perf_counter() - t0
assert why is None, why
print(json.dumps({"lookup": taken}))
"""


def compare(rev: str, layers: int, pairs: int, rounds: int, distributions: int) -> dict[str, Any]:
    """Medians over ``pairs`` alternating processes a tree and form (and lookup)."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with checked_out(rev) as tree:
        for _ in range(pairs):
            for form in FORMS:
                for side, where in (("now", ROOT), (rev, tree)):
                    measured = run_in_tree(where, _PROBE, layers, rounds, form)
                    runs.setdefault((side, form), []).append(measured)
            for count in (0, distributions):
                for side, where in (("now", ROOT), (rev, tree)):
                    measured = run_in_tree(where, _LOOKUP_PROBE, count)
                    runs.setdefault((side, f"lookup {count}"), []).append(measured)
    return {
        "rev": rev,
        "modules": runs[("now", FORMS[0])][0]["modules"],
        "distributions": distributions,
        **{
            f"{side} {form}": {
                step: statistics.median(run[step] for run in found)
                for step in (("lookup",) if form.startswith("lookup") else ("first", "later"))
            }
            for (side, form), found in runs.items()
        },
    }


def report(results: dict[str, Any]) -> None:
    rev = results["rev"]
    print(f"{results['modules']} modules, rebuild_plan, collector on; milliseconds (medians)")
    print(f"{'entry form':<10} {'rebuild':<7} {rev:>12} {'now':>10} {'now / ' + rev:>16}")
    for form in FORMS:
        for step in ("first", "later"):
            before, now = results[f"{rev} {form}"][step], results[f"now {form}"][step]
            print(
                f"{form:<10} {step:<7} {before * 1e3:12.2f} {now * 1e3:10.2f} {now / before:16.2f}"
            )
    print("the first read's lookup of whose code models is, in a fresh process (ms, medians):")
    for count in (0, results["distributions"]):
        before, now = results[f"{rev} lookup {count}"]["lookup"], results[f"now lookup {count}"]["lookup"]
        beside = f"beside {count} distributions" if count else "alone in its folder"
        print(f"  {beside:<30} {before * 1e3:12.2f} {now * 1e3:10.2f} {now / before:16.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit to compare with (e.g. main's last landing)")
    parser.add_argument("--layers", type=int, default=250, help="about 4 modules a layer")
    parser.add_argument("--pairs", type=int, default=4, help="processes a tree and form")
    parser.add_argument("--rounds", type=int, default=15, help="later rebuilds a process")
    parser.add_argument(
        "--distributions", type=int, default=400, help="beside the package, for the lookup"
    )
    args = parser.parse_args()
    report(compare(args.rev, args.layers, args.pairs, args.rounds, args.distributions))


if __name__ == "__main__":
    main()
