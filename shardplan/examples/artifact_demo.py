"""``shardplan-demo --artifact PATH [--ranks N]``: run a real producer's plan on N processes.

The artifact (the shared fixture: hyper-parallel's Qwen3-MoE plan) is rebuilt with the
generated code, checked against this project's tiny Qwen3-MoE-shaped model and the mesh
(``check_fit``: exit 2, before any process starts, when it does not fit), then applied on
N gloo processes with this project's implementations of the plan's two callables. One
forward and one backward step are compared with one process: exit 0 only when the logits
are within 1e-5 and every parameter's gradient within 1e-4.

The mesh: the plan's axes (``mesh_dim_names``), each of the size ``parallel_dims`` gives
it, but the first, which takes the ranks left (N divided by the others' sizes).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from shardplan.examples.ranks import folder, free_port, launch_ranks

FORWARD_TOLERANCE = 1e-5
GRAD_TOLERANCE = 1e-4
REFERENCE_FILE = "reference.pt"
CASES_FILE = "cases.json"
BATCH, SEQ = 2, 16


@dataclass(frozen=True)
class Case:
    """One run of an artifact: its path, and whether the gradient rule is on."""

    artifact: str
    partial_input_grads: bool = True

    @property
    def label(self) -> str:
        suffix = "" if self.partial_input_grads else " (torch's default gradient layouts)"
        return f"{Path(self.artifact).name}{suffix}"


def rebuild(path: str | Path) -> Any:
    import shardplan
    from shardplan import load_meta
    from shardplan.examples.qwen3_moe_parallel import IMPLEMENTATIONS

    # The fixture's two Targets are bound to this project's implementations (a mapping in
    # allow_targets): nothing is imported for them, whatever their paths say.
    return shardplan.rebuild_plan(load_meta(path), allow_targets=IMPLEMENTATIONS)


def mesh_shape(plan: Any, ranks: int) -> dict[str, int] | str:
    """``{axis: size}`` for ``ranks`` processes, or why there is none."""
    axes = list(plan.mesh_dim_names or ())
    if not axes:
        return "the plan records no mesh_dim_names; this demo builds the mesh from them"
    dims = plan.other_keys.get("parallel_dims", {})
    sizes = {a: int(dims.get(f"{a}_size", 1)) for a in axes}
    rest = math.prod(sizes[a] for a in axes[1:])
    if ranks % rest:
        return f"{ranks} ranks do not form a mesh with {axes[1:]} of sizes {[sizes[a] for a in axes[1:]]}"
    sizes[axes[0]] = ranks // rest
    return sizes


def build_model() -> Any:
    from shardplan.examples.qwen3_moe import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(Qwen3MoeConfig())


def prepare(out: Path) -> None:
    """The one-process reference: the model, its inputs, logits and gradients."""
    model = build_model()
    config = model.config
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=generator)
    positions = torch.arange(SEQ).expand(BATCH, SEQ).contiguous()
    seed = torch.randn(BATCH, SEQ, config.vocab_size, generator=generator)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    logits = model(ids, positions)
    (logits * seed).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    torch.save(
        {
            "state_dict": state,
            "input_ids": ids,
            "position_ids": positions,
            "seed": seed,
            "logits": logits.detach(),
            "grads": grads,
        },
        out / REFERENCE_FILE,
    )


def _local(tensor: torch.Tensor, mesh: Any, named: Any, names: tuple[str, ...]) -> torch.Tensor:
    from torch.distributed.tensor import distribute_tensor

    from shardplan.parallelize.layout import resolve

    placements = resolve(named, names, "demo input")
    local: torch.Tensor = distribute_tensor(tensor, mesh, placements, src_data_rank=None).to_local()
    return local


def rank_results(
    cases: list[Case], shape: dict[str, int], reference: dict[str, Any]
) -> list[dict[str, Any]]:
    """One rank, its process group up: for each case, apply the plan, one forward and
    backward, compare with the one-process reference."""
    from torch.distributed.device_mesh import init_device_mesh

    from shardplan import apply_plan
    from shardplan.examples.qwen3_moe_parallel import IMPLEMENTATIONS
    from shardplan.parallelize.engine import full_tensor, parameter_layouts, sub_mesh

    results = []
    mesh = init_device_mesh("cpu", tuple(shape.values()), mesh_dim_names=tuple(shape))
    for case in cases:
        start = time.perf_counter()
        plan = rebuild(case.artifact)
        model = build_model()
        model.load_state_dict(reference["state_dict"])
        apply_plan(
            model,
            plan,
            mesh,
            implementations=IMPLEMENTATIONS,
            overrides_applied=True,
            partial_input_grads=case.partial_input_grads,
        )
        names = tuple(n for n in shape if n in (plan.mesh_dim_names or shape))
        region = sub_mesh(mesh, names)
        embed = plan.modules["model.embed_tokens"].in_src["input"]
        head = plan.modules["lm_head"].out_dst["output"]
        ids = _local(reference["input_ids"], region, embed, names)
        positions = _local(reference["position_ids"], region, embed, names)
        logits = model(ids, positions)
        expected = _local(reference["logits"], region, head, names)
        forward = (logits.detach() - expected).abs().max().item()
        (logits * _local(reference["seed"], region, head, names)).sum().backward()
        layouts = parameter_layouts(model)
        grad = 0.0
        for name, param in model.named_parameters():
            local = param.grad if param.grad is not None else torch.zeros_like(param)
            where = layouts.get(name)
            full = full_tensor(local, where) if where is not None else local
            want = reference["grads"].get(name, torch.zeros_like(full))
            grad = max(grad, (full - want).abs().max().item())
        results.append(
            {
                "case": asdict(case),
                "forward": forward,
                "grad": grad,
                "seconds": time.perf_counter() - start,
            }
        )
    return results


def worker(rank: int, world: int, port: int, out: Path) -> None:
    """One rank the demo started itself: its results into ``out``."""
    import torch.distributed as dist

    cases = [Case(**c) for c in json.loads((out / CASES_FILE).read_text())["cases"]]
    shape = json.loads((out / CASES_FILE).read_text())["mesh"]
    reference = torch.load(out / REFERENCE_FILE)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        results = rank_results(cases, shape, reference)
        (out / f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        # Every rank finishes its collectives before any tears its group down: a rank that
        # destroyed its group while a peer still sent aborted gloo ("terminate called
        # without an active exception", exit -6).
        dist.barrier()
        dist.destroy_process_group()


def fit(cases: list[Case], ranks: int) -> dict[str, int] | list[str]:
    """The mesh every case runs on, or the lines saying why a case cannot run (it does not
    load, form a mesh, or fit the model and the mesh)."""
    from shardplan import MetaError, check_fit

    model = build_model()
    shape: dict[str, int] | None = None
    for case in cases:
        try:
            plan = rebuild(case.artifact)
        except (MetaError, OSError) as exc:
            return [f"demo: {case.artifact}: {exc}"]
        found = mesh_shape(plan, ranks)
        if isinstance(found, str):
            return [f"demo: {case.artifact}: {found}"]
        shape = shape or found
        findings = check_fit(plan, model, found, overrides_applied=True)
        if findings:
            return [
                f"demo: {case.artifact} does not fit the model and the mesh "
                f"({', '.join(f'{k}={v}' for k, v in found.items())}, {ranks} ranks); "
                "nothing was started:",
                *(f"  {finding}" for finding in findings),
            ]
    assert shape is not None
    return shape


def summary(cases: list[Case], per_rank: list[list[dict[str, Any]]], start: float) -> int:
    """Print each case's worst differences over the ranks; returns the exit status."""
    ok = True
    for index, case in enumerate(cases):
        forward = max(r[index]["forward"] for r in per_rank)
        grad = max(r[index]["grad"] for r in per_rank)
        within = forward <= FORWARD_TOLERANCE and grad <= GRAD_TOLERANCE
        ok = ok and within
        print(f"{case.label}:")
        print(f"  forward max |diff| {forward:.3e} (tolerance {FORWARD_TOLERANCE:g})")
        print(f"  grad max |diff| {grad:.3e} (tolerance {GRAD_TOLERANCE:g})")
    print(f"{'OK' if ok else 'FAILED'} in {time.perf_counter() - start:.1f} s wall")
    return 0 if ok else 1


def torchrun_rank(cases: list[Case], out: Path | None, timeout: float) -> int:
    """The artifact run as one of torchrun's ranks: the mesh from its world size; rank 0
    checks the fit and computes the reference, which every rank receives over the group;
    rank 0 reports. Every rank exits with the same status (2: does not fit, nothing run)."""
    import torch.distributed as dist

    start = time.perf_counter()
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        sent: list[Any] = [None, None]
        with folder(out if rank == 0 else None) as here:
            if rank == 0:
                found = fit(cases, world)
                if isinstance(found, list):
                    print("\n".join(found), file=sys.stderr)
                else:
                    prepare(here)
                    sent = [found, torch.load(here / REFERENCE_FILE)]
                    print(
                        f"plan fits: mesh ({', '.join(f'{k}={v}' for k, v in found.items())}) "
                        f"on {world} torchrun ranks; reference: one process"
                    )
        dist.broadcast_object_list(sent, src=0)
        shape, reference = sent
        if shape is None:
            return 2
        per_rank: list[Any] = [None] * world
        dist.all_gather_object(per_rank, rank_results(cases, shape, reference))
        status = [summary(cases, per_rank, start) if rank == 0 else 0]
        dist.broadcast_object_list(status, src=0)
        return int(status[0])
    finally:
        dist.barrier()
        dist.destroy_process_group()


def run(cases: list[Case], ranks: int, out: Path, timeout: float) -> int:
    """Check, prepare, run the ranks, report. Returns the exit status (0, 1, or 2: no fit)."""

    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    shape = fit(cases, ranks)
    if isinstance(shape, list):
        print("\n".join(shape), file=sys.stderr)
        return 2
    prepare(out)
    (out / CASES_FILE).write_text(json.dumps({"cases": [asdict(c) for c in cases], "mesh": shape}))
    print(
        f"plan fits: mesh ({', '.join(f'{k}={v}' for k, v in shape.items())}) on {ranks} gloo "
        "processes; reference: one process"
    )
    flags = ["--world", str(ranks), "--artifact-rank"]
    per_rank = launch_ranks(out, free_port(), flags, ranks, timeout)
    return 1 if per_rank is None else summary(cases, per_rank, start)
