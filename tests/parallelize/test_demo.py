"""The demo's command line as a new user meets it: torchrun's ranks, arguments refused
before anything starts, a failed run that leaves nothing behind, the help.

The refusals run in this process (the demo checks its arguments before it imports
torch); the runs are real processes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shardplan.examples import demo, ranks
from tests.helpers import REPO, run_in


@pytest.mark.processes
def test_the_demo_runs_on_torchruns_two_gloo_ranks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # torchrun itself (torch.distributed.run), with this interpreter; its ranks get RANK,
    # WORLD_SIZE, MASTER_ADDR and MASTER_PORT and rendezvous through them.
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        + ["-m", "shardplan.examples.demo", "--out", str(out), "--timeout", "90"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"torchrun: 2 ranks \(gloo, rendezvous at [\w.]+:\d+\)", result.stdout)
    assert "checked 18 sharded parameters on each rank" in result.stdout
    diff = float(re.search(r"max \|sharded - unsharded\| = (\S+)", result.stdout)[1])  # type: ignore[index]
    assert diff <= 1e-5
    assert result.stdout.count("OK in ") == 1  # rank 0 reports, once
    import shardplan
    from shardplan.artifact.meta import meta_to_json
    from shardplan.examples.llama import LlamaConfig
    from shardplan.examples.plan import tensor_parallel_plan

    plan = tensor_parallel_plan(LlamaConfig(n_layers=2))
    written = (out / "codegen_meta.json").read_text()
    assert written == meta_to_json(shardplan.freeze_plan(plan))
    assert sorted(p.name for p in out.iterdir()) == ["codegen_meta.json"]
    # Every parameter of a sharded layer is a DTensor (a row-wise bias too, replicated).
    from torch.distributed.tensor import Replicate

    from shardplan.parallelize.apply import planned_placements

    placements = planned_placements(plan, ("tp",))
    sharded_layers = {
        n.rpartition(".")[0]
        for n, p in placements.items()
        if n.endswith(".weight") and p != (Replicate(),)
    }
    expected = sum(1 for name in placements if name.rpartition(".")[0] in sharded_layers)
    assert f"checked {expected} sharded parameters on each rank" in result.stdout


@pytest.mark.processes
def test_a_failed_run_leaves_nothing_behind(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = run_in(
        REPO, "-m", "shardplan.examples.demo", "--timeout", "0.2", env={"TMPDIR": str(temp)}
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith("the ranks did not finish within 0.2 s; stopped them")
    assert "Traceback" not in result.stderr
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{file}"], "--out {file}: a file is there; name a folder"),
        (["--layers", "-2"], "--layers must be at least 1, got -2"),
        (["--timeout", "0"], "--timeout must be more than 0 seconds, got 0"),
        (["--ranks", "2"], "--ranks applies to --artifact runs"),
        (["--artifact", "a.json", "--ranks", "0"], "--ranks must be at least 1, got 0"),
        (["--layers", "x"], "argument --layers: invalid int value: 'x'"),
    ],
    ids=[
        "out-is-a-file",
        "layers-negative",
        "timeout-zero",
        "ranks-alone",
        "ranks-zero",
        "layers-x",
    ],
)
def test_a_bad_argument_exits_2_with_one_line_before_anything_starts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    file = tmp_path / "codegen_meta.json"
    file.write_text("{}")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for name in ranks.TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    started = []
    monkeypatch.setattr(demo, "prepare", lambda *a: started.append(a))
    monkeypatch.setattr(ranks.subprocess, "Popen", lambda *a, **k: started.append(a))
    try:
        status = demo.main([a.format(file=file) for a in args])
    except SystemExit as exc:  # argparse's own refusals (a value that is not an int)
        status = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert (status, out, started) == (2, "", [])
    assert err.startswith("shardplan-demo: " + message.format(file=file)) and err.count("\n") == 1
    assert list(temp.iterdir()) == [] and file.read_text() == "{}"


def test_ranks_under_torchrun_are_torchruns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in zip(ranks.TORCHRUN_ENV, ("0", "4", "127.0.0.1", "29500"), strict=True):
        monkeypatch.setenv(name, value)
    assert demo.main(["--artifact", "a.json", "--ranks", "2"]) == 2
    assert "set --nproc-per-node, not --ranks" in capsys.readouterr().err


def test_help_is_plain_text_with_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        demo.main(["--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text
    for default in ("(default: 2)", "(default: 120)", "(default: 4;", "removed at the end)"):
        assert default in text
    assert "torchrun --standalone --nproc-per-node 2 -m shardplan.examples.demo" in " ".join(
        text.split()
    )


def test_shardplan_demo_is_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    from shardplan.cli import main

    assert main(["demo", "--layers", "0"]) == 2
    assert capsys.readouterr().err == "shardplan demo: --layers must be at least 1, got 0\n"


def test_the_demos_folder_is_removed_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(ranks.INDUCTOR_CACHE, raising=False)
    with pytest.raises(RuntimeError), ranks.folder(None) as here:
        assert here.parent == tmp_path and here.name.startswith(ranks.TEMP_PREFIX)
        (here / "codegen_meta.json").write_text(json.dumps({}))
        assert os.environ[ranks.INDUCTOR_CACHE].startswith(str(here))
        raise RuntimeError("a rank failed")
    assert list(tmp_path.iterdir()) == []
    assert ranks.INDUCTOR_CACHE not in os.environ
