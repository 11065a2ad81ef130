"""End to end on real torch: ``shardplan-demo`` / ``python -m shardplan.examples.demo``.

Builds the example model and its tensor-parallel plan, freezes the plan with the
generated code into codegen_meta.json, then starts two CPU processes (gloo, loopback
only). Each loads the artifact, rebuilds the plan with the generated code, shards the
model with torch's tensor-parallel engine, checks every sharded parameter, and runs a
forward pass on the same input. The outputs must match the unsharded model's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

WORLD_SIZE = 2
ARTIFACT = "codegen_meta.json"
MODEL_FILE = "model.pt"
TOLERANCE = 1e-5


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(out: Path, layers: int) -> dict[str, Any]:
    """Build model and plan, freeze the plan, write the artifact and the model; returns facts."""
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
    torch.save(
        {
            "config": asdict(config),
            "state_dict": model.state_dict(),
            "input_ids": input_ids,
            "expected": expected,
        },
        out / MODEL_FILE,
    )
    return {"modules": len(plan.modules), "parameters": sum(p.numel() for p in model.parameters())}


def worker(rank: int, port: int, out: Path) -> None:
    """One tensor-parallel rank: artifact -> rebuilt plan -> sharded model -> checks and forward."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    import shardplan
    from shardplan import apply_plan, load_meta
    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from shardplan.parallelize.apply import planned_placements

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE
    )
    try:
        mesh = init_device_mesh("cpu", (WORLD_SIZE,), mesh_dim_names=("tp",))
        # The example plan names no Target, so the demo trusts none (docs/contract.md §8).
        plan = shardplan.rebuild_plan(load_meta(out / ARTIFACT), allow_targets=())
        saved = torch.load(out / MODEL_FILE)
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
                want = torch.chunk(original[name], WORLD_SIZE, dim=placement.dim)[rank].shape
                if param.to_local().shape != want:
                    problems.append(
                        f"{name}: local shard {tuple(param.to_local().shape)} != {tuple(want)}"
                    )
        with torch.no_grad():
            output = model(saved["input_ids"])
        result = {
            "rank": rank,
            "sharded_parameters": sharded,
            "problems": problems,
            "max_abs_diff": (output - saved["expected"]).abs().max().item(),
        }
        (out / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        # No rank tears its group down while a peer still talks to it (docs/contract.md §13).
        dist.barrier()
        dist.destroy_process_group()


def run(out: Path, layers: int, timeout: float) -> int:
    """The demo: prepare, run the two ranks, report. Returns the exit status."""
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    facts = prepare(out, layers)
    artifact = out / ARTIFACT
    print(
        f"built a {layers}-layer Llama-style model ({facts['parameters']:,} parameters) and its tp plan ({facts['modules']} modules)"
    )
    print(f"froze the plan with the generated code: {artifact} ({artifact.stat().st_size:,} bytes)")
    port = _free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "shardplan.examples.demo",
        "--out",
        str(out),
        "--port",
        str(port),
        "--rank",
    ]
    print(
        f"started {WORLD_SIZE} CPU processes (gloo on 127.0.0.1:{port}); each rebuilds the plan and shards the model"
    )
    procs = [subprocess.Popen([*command, str(rank)], env=env) for rank in range(WORLD_SIZE)]
    deadline = time.monotonic() + timeout
    try:
        codes = [proc.wait(timeout=max(0.1, deadline - time.monotonic())) for proc in procs]
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        print(
            f"demo: the ranks did not finish within {timeout:.0f} s; stopped them", file=sys.stderr
        )
        return 1
    if any(codes):
        print(f"demo: a rank failed (exit statuses {codes})", file=sys.stderr)
        return 1
    results = [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    problems = [p for r in results for p in r["problems"]]
    diff = max(r["max_abs_diff"] for r in results)
    print(
        f"checked {results[0]['sharded_parameters']} sharded parameters on each rank: full_tensor() equals the original, local shards match the placements"
    )
    print(f"forward pass: max |sharded - unsharded| = {diff:.3e} (tolerance {TOLERANCE:g})")
    for problem in problems:
        print(f"demo: {problem}", file=sys.stderr)
    ok = not problems and diff <= TOLERANCE
    print(f"{'OK' if ok else 'FAILED'} in {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Command line of the demo; ``--rank`` runs one worker (used by the demo itself)."""
    parser = argparse.ArgumentParser(prog="shardplan-demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="folder for codegen_meta.json (default: a new temporary folder)"
    )
    parser.add_argument("--layers", type=int, default=2, help="decoder layers of the example model")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds the ranks may take")
    parser.add_argument(
        "--artifact",
        type=Path,
        action="append",
        help="run this codegen_meta.json (the shared Qwen3-MoE fixture) on --ranks processes "
        "with the project's Qwen3-MoE-shaped model, against one process; repeatable",
    )
    parser.add_argument("--ranks", type=int, default=4, help="processes for --artifact (default 4)")
    # An ablation, for the tests: this artifact again, with torch's default gradient layouts.
    parser.add_argument(
        "--default-grads-artifact", type=Path, action="append", help=argparse.SUPPRESS
    )
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--artifact-rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank is not None:
        worker(args.rank, args.port, args.out)
        return 0
    if args.artifact_rank is not None:
        from shardplan.examples import artifact_demo

        artifact_demo.worker(args.artifact_rank, args.world, args.port, args.out)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="specgen-demo-"))
    if args.artifact or args.default_grads_artifact:
        from shardplan.examples import artifact_demo

        cases = [artifact_demo.Case(str(a)) for a in args.artifact or ()]
        cases += [artifact_demo.Case(str(a), False) for a in args.default_grads_artifact or ()]
        return artifact_demo.run(cases, args.ranks, out, args.timeout)
    return run(out, args.layers, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
