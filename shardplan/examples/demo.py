"""End to end on real torch: ``shardplan-demo``, ``shardplan demo`` and
``python -m shardplan.examples.demo``.

Builds the example model and its tensor-parallel plan, freezes the plan with the
generated code into codegen_meta.json, then runs it on CPU processes over gloo. Each
rank loads the artifact, rebuilds the plan with the generated code, shards the model with
``apply_plan``, checks every sharded parameter, and runs a forward pass on the same input.
The outputs must match the unsharded model's.

Two ways to get the ranks: on its own, the demo starts two processes on this machine
(loopback only); under torchrun, it is one of torchrun's ranks, and rank, world size and
rendezvous come from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
torch is imported only once the arguments are known good.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from shardplan.examples.ranks import (
    folder,
    free_port,
    launch_ranks,
    under_torchrun,
)

WORLD_SIZE = 2
ARTIFACT = "codegen_meta.json"
MODEL_FILE = "model.pt"
TOLERANCE = 1e-5
DEFAULT_RANKS = 4  # for --artifact: a (cp=2, tp=2) mesh for the shared fixture


def prepare(out: Path, layers: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build model and plan, freeze the plan and write the artifact into ``out``. Returns
    facts to print and what the ranks need: the model's config, weights, input and the
    unsharded output."""
    import torch

    import shardplan
    from shardplan import dump_meta
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from shardplan.examples.plan import tensor_parallel_plan

    torch.manual_seed(0)
    config = LlamaConfig(n_layers=layers)
    model = LlamaForCausalLM(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (2, 16))
    with torch.no_grad():
        expected = model(input_ids)
    plan = tensor_parallel_plan(config)
    dump_meta(shardplan.freeze_plan(plan), out / ARTIFACT)
    saved = {
        "config": asdict(config),
        "state_dict": model.state_dict(),
        "input_ids": input_ids,
        "expected": expected,
    }
    facts = {"modules": len(plan.modules), "parameters": sum(p.numel() for p in model.parameters())}
    return facts, saved


def check_rank(rank: int, world: int, artifact: Path, saved: dict[str, Any]) -> dict[str, Any]:
    """One tensor-parallel rank, its process group up: artifact -> rebuilt plan -> sharded
    model -> checks and forward. Returns the rank's report."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    import shardplan
    from shardplan import apply_plan, load_meta
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from shardplan.parallelize.apply import planned_placements

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    # The example plan names no Target, so the demo trusts none (docs/contract.md §8).
    plan = shardplan.rebuild_plan(load_meta(artifact), allow_targets=())
    model = LlamaForCausalLM(LlamaConfig(**saved["config"])).eval()
    model.load_state_dict(saved["state_dict"])
    original = {name: p.detach().clone() for name, p in model.named_parameters()}
    apply_plan(model, plan, mesh)
    sharded, problems = 0, []
    for name, placements in planned_placements(plan, ("tp",)).items():
        param = model.get_parameter(name)
        if not isinstance(param, DTensor):
            if not all(type(p) is Replicate for p in placements) or not torch.equal(
                param, original[name]
            ):
                problems.append(f"{name}: expected {placements}, got a plain tensor")
            continue
        sharded += 1
        if tuple(param.placements) != placements:
            problems.append(f"{name}: placements {param.placements} != planned {placements}")
        if not torch.equal(param.full_tensor(), original[name]):
            problems.append(f"{name}: full_tensor() differs from the original parameter")
        (placement,) = placements
        if isinstance(placement, Shard):
            want = torch.chunk(original[name], world, dim=placement.dim)[rank].shape
            if param.to_local().shape != want:
                problems.append(
                    f"{name}: local shard {tuple(param.to_local().shape)} != {tuple(want)}"
                )
    with torch.no_grad():
        output = model(saved["input_ids"])
    return {
        "rank": rank,
        "sharded_parameters": sharded,
        "problems": problems,
        "max_abs_diff": (output - saved["expected"]).abs().max().item(),
    }


def worker(rank: int, port: int, out: Path) -> None:
    """One rank the demo started itself: joins the group on 127.0.0.1:``port``, checks, and
    writes its report to ``out``."""
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE
    )
    try:
        saved = torch.load(out / MODEL_FILE)
        result = check_rank(rank, WORLD_SIZE, out / ARTIFACT, saved)
        (out / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        # No rank tears its group down while a peer still talks to it (docs/contract.md §13).
        dist.barrier()
        dist.destroy_process_group()


def report(results: list[dict[str, Any]], start: float) -> int:
    """Print what the ranks found; returns the exit status."""
    problems = [p for r in results for p in r["problems"]]
    diff = max(r["max_abs_diff"] for r in results)
    print(
        f"checked {results[0]['sharded_parameters']} sharded parameters on each rank: "
        "full_tensor() equals the original, local shards match the placements"
    )
    print(f"forward pass: max |sharded - unsharded| = {diff:.3e} (tolerance {TOLERANCE:g})")
    for problem in problems:
        print(f"demo: {problem}", file=sys.stderr)
    ok = not problems and diff <= TOLERANCE
    print(f"{'OK' if ok else 'FAILED'} in {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


def _print_prepared(facts: dict[str, Any], layers: int, artifact: Path, kept: bool) -> None:
    print(
        f"built a {layers}-layer Llama-style model ({facts['parameters']:,} parameters) "
        f"and its tp plan ({facts['modules']} modules)"
    )
    where = "" if kept else "; a temporary folder, removed at the end (--out DIR keeps it)"
    print(
        f"froze the plan with the generated code: {artifact} "
        f"({artifact.stat().st_size:,} bytes){where}"
    )


def run(out: Path | None, layers: int, timeout: float) -> int:
    """The demo on its own: prepare, start two ranks, report. Returns the exit status."""
    import torch

    start = time.perf_counter()
    with folder(out) as here:
        facts, saved = prepare(here, layers)
        torch.save(saved, here / MODEL_FILE)
        _print_prepared(facts, layers, here / ARTIFACT, out is not None)
        port = free_port()
        print(
            f"started {WORLD_SIZE} CPU processes (gloo on 127.0.0.1:{port}); each rebuilds "
            "the plan and shards the model"
        )
        results = launch_ranks(here, port, ["--rank"], WORLD_SIZE, timeout)
        return 1 if results is None else report(results, start)


def torchrun_rank(out: Path | None, layers: int, timeout: float) -> int:
    """The demo as one of torchrun's ranks. Rank 0 builds the model and plan and writes the
    artifact into ``out``; every rank gets the artifact's bytes and the model over the
    process group (so nodes need no shared folder), loads the artifact from its own file,
    shards and checks; rank 0 reports. Every rank exits with the same status."""
    import torch.distributed as dist

    from shardplan.artifact.atomic import atomic_write_bytes

    start = time.perf_counter()
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        with folder(out if rank == 0 else None) as here:
            sent: list[Any] = [None, None]
            if rank == 0:
                facts, saved = prepare(here, layers)
                _print_prepared(facts, layers, here / ARTIFACT, out is not None)
                print(
                    f"torchrun: {world} ranks (gloo, rendezvous at "
                    f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}); each loads the "
                    "artifact, rebuilds the plan and shards the model"
                )
                sent = [(here / ARTIFACT).read_bytes(), saved]
            dist.broadcast_object_list(sent, src=0)
            artifact_bytes, saved = sent
            if rank != 0:
                atomic_write_bytes(here / ARTIFACT, artifact_bytes)
            result = check_rank(rank, world, here / ARTIFACT, saved)
            results: list[Any] = [None] * world
            dist.all_gather_object(results, result)
            status = [report(results, start) if rank == 0 else 0]
            dist.broadcast_object_list(status, src=0)
            return int(status[0])
    finally:
        dist.barrier()
        dist.destroy_process_group()


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the fix, exit 2, before anything starts."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Freeze the example plan into codegen_meta.json, then load, rebuild and "
        "apply it on CPU processes (gloo) and check the sharded model against the "
        "unsharded one. On its own it starts its ranks on this machine; under torchrun it "
        "is one of torchrun's ranks.",
        epilog="exit status: 0 ok, 1 a check failed or the ranks timed out, 2 bad input or "
        "a plan that does not fit (nothing started). Under torchrun: torchrun "
        "--standalone --nproc-per-node 2 -m shardplan.examples.demo --out DIR",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder for codegen_meta.json, created if missing (default: a temporary "
        "folder, removed at the end)",
    )
    parser.add_argument(
        "--layers", type=int, metavar="N", help="decoder layers of the example model (default: 2)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds the ranks may take (default: %(default)g)",
    )
    parser.add_argument(
        "--artifact",
        type=Path,
        action="append",
        metavar="PATH",
        help="run this codegen_meta.json (the shared Qwen3-MoE fixture) on --ranks "
        "processes with the project's Qwen3-MoE-shaped model, against one process; "
        "repeatable",
    )
    parser.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help=f"processes for --artifact (default: {DEFAULT_RANKS}; under torchrun, its ranks)",
    )
    # An ablation, for the tests: this artifact again, with torch's default gradient layouts.
    parser.add_argument(
        "--default-grads-artifact", type=Path, action="append", help=argparse.SUPPRESS
    )
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--artifact-rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser


def refusal(args: argparse.Namespace, torchrun: bool) -> str | None:
    """Why these arguments cannot run, in one line; None when they can."""
    artifacts = args.artifact or args.default_grads_artifact
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        return f"--out {args.out}: a file is there; name a folder (it is created if missing)"
    if args.layers is not None and args.layers < 1:
        return f"--layers must be at least 1, got {args.layers}"
    if args.layers is not None and artifacts:
        return "--layers sets the example model; --artifact runs the Qwen3-MoE-shaped one"
    if not args.timeout > 0:
        return f"--timeout must be more than 0 seconds, got {args.timeout:g}"
    if args.ranks is not None:
        if not artifacts:
            return (
                f"--ranks applies to --artifact runs; the example plan runs on {WORLD_SIZE} "
                "processes (under torchrun: --nproc-per-node)"
            )
        if torchrun:
            return "under torchrun the ranks are torchrun's: set --nproc-per-node, not --ranks"
        if args.ranks < 1:
            return f"--ranks must be at least 1, got {args.ranks}"
    return None


def main(argv: list[str] | None = None, prog: str = "shardplan-demo") -> int:
    """Command line of the demo; ``--rank`` and ``--artifact-rank`` run one rank the demo
    started itself."""
    args = _parser(prog).parse_args(argv)
    if args.rank is not None:
        worker(args.rank, args.port, args.out)
        return 0
    if args.artifact_rank is not None:
        from shardplan.examples import artifact_demo

        artifact_demo.worker(args.artifact_rank, args.world, args.port, args.out)
        return 0
    torchrun = under_torchrun()
    refused = refusal(args, torchrun)
    if refused is not None:
        print(f"{prog}: {refused}", file=sys.stderr)
        return 2
    layers = args.layers if args.layers is not None else 2
    if args.artifact or args.default_grads_artifact:
        from shardplan.examples import artifact_demo

        cases = [artifact_demo.Case(str(a)) for a in args.artifact or ()]
        cases += [artifact_demo.Case(str(a), False) for a in args.default_grads_artifact or ()]
        if torchrun:
            return artifact_demo.torchrun_rank(cases, args.out, args.timeout)
        with folder(args.out) as here:
            return artifact_demo.run(cases, args.ranks or DEFAULT_RANKS, here, args.timeout)
    if torchrun:
        return torchrun_rank(args.out, layers, args.timeout)
    return run(args.out, layers, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
