"""The shared fixture applied on 4 gloo processes, against one process (docs/contract.md §13).

MULTI-PROCESS, and the only one of this change: ONE launch of 4 ranks (a (cp=2, tp=2)
mesh) runs four cases back to back, so torch is imported and the group set up once
(about 10-25 s on a busy 2-core machine):

- the fixture as it is: forward within 1e-5, gradients within 1e-4;
- without its inner_wrapper rules: the forward is off by more than 0.1;
- with torch's default gradient layouts at the gathers: the gradients are off by more
  than 0.1 while the forward still matches;
- with every ep_size set to 4 (experts over all four ranks): within tolerance again.

The demo's parent runs in this test's process (``artifact_demo.run``), which saves a
torch import; only the ranks are processes. The plans that do not fit exit 2 before any
rank starts, so they cost no process at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from shardplan.examples import artifact_demo
from shardplan.examples.artifact_demo import Case
from tests.helpers import QWEN3_MOE, shared_fixture


def _edited(tmp_path: Path, name: str, edit: Any) -> str:
    document = json.loads(shared_fixture(QWEN3_MOE).read_text())
    edit(document)
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2, sort_keys=True))
    return str(path)


def _without_inner_wrappers(document: dict[str, Any]) -> None:
    document["injections"] = [r for r in document["injections"] if "inner_wrapper" not in r]


def _experts_over_all_ranks(document: dict[str, Any]) -> None:
    for rule in document["injections"]:
        if "ep_size" in rule:
            rule["ep_size"] = 4
    document["parallel_dims"]["ep_size"] = 4


def _renamed_class(document: dict[str, Any]) -> None:
    document["boundary_classes"]["model.layers.2.self_attn"] = "FlashAttention"


def _reported(stdout: str) -> list[tuple[float, float]]:
    forward = [float(x) for x in re.findall(r"forward max \|diff\| (\S+)", stdout)]
    grad = [float(x) for x in re.findall(r"grad max \|diff\| (\S+)", stdout)]
    return list(zip(forward, grad, strict=True))


@pytest.mark.processes
def test_fixture_on_four_ranks_matches_one_process_and_the_ablations_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = str(shared_fixture(QWEN3_MOE))
    cases = [
        Case(fixture),
        Case(_edited(tmp_path, "no_inner_wrapper.json", _without_inner_wrappers)),
        Case(fixture, partial_input_grads=False),
        Case(_edited(tmp_path, "ep4.json", _experts_over_all_ranks)),
    ]
    status = artifact_demo.run(cases, 4, tmp_path / "run", timeout=120)
    out = capsys.readouterr().out
    exact, no_wrapper, default_grads, ep4 = _reported(out)
    assert status == 1, out  # the ablations fail, as they must
    assert exact[0] <= 1e-5 and exact[1] <= 1e-4, out
    assert no_wrapper[0] > 0.1, out
    assert default_grads[0] <= 1e-5 and default_grads[1] > 0.1, out
    assert ep4[0] <= 1e-5 and ep4[1] <= 1e-4, out


@pytest.mark.parametrize(
    ("ranks", "edit", "named"),
    [
        (2, None, "the mesh's cp dimension has size 1 (mesh (cp=1, tp=2), 2 ranks)"),
        (
            4,
            _renamed_class,
            "boundary_classes['model.layers.2.self_attn']: the plan expects a FlashAttention",
        ),
    ],
    ids=["two-ranks", "renamed-class"],
)
def test_a_plan_that_does_not_fit_exits_2_before_any_rank_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ranks: int, edit: Any, named: str
) -> None:
    artifact = _edited(tmp_path, "a.json", edit) if edit else str(shared_fixture(QWEN3_MOE))
    status = artifact_demo.run([Case(artifact)], ranks, tmp_path / "run", timeout=60)
    err = capsys.readouterr().err
    assert status == 2 and named in err and "nothing was started" in err, err
    assert list((tmp_path / "run").iterdir()) == []  # no reference, no rank ever ran
