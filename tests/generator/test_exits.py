"""A project module that ends the process while specgen imports it: `specgen check` and
`generate` exit 2 naming the module, never 0 with nothing done (generator/supervise.py).

Real processes (``run_specgen``): the end of a process is what is tested."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import TABLE_FILE, run_specgen, snapshot

ENDS = {
    "os._exit": "import os\nos._exit(0)\n",
    "sys.exit": "import sys\nsys.exit(0)\n",
    "a signal": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
}


@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_table_module_that_ends_the_process_is_exit_2_naming_it(
    repo_copy: Path, end: str
) -> None:
    with (repo_copy / TABLE_FILE).open("a", encoding="utf-8") as table:
        table.write(ENDS[end])
    before = snapshot(repo_copy / "generated")
    for command in ("check", "generate") if end == "os._exit" else ("check",):
        ran = run_specgen(repo_copy, command)
        assert ran.returncode == 2, (command, ran.stdout, ran.stderr)
        assert "shardplan.table.spec_fields" in ran.stderr, ran.stderr
        assert "Traceback" not in ran.stderr, ran.stderr
    assert snapshot(repo_copy / "generated") == before


def test_a_supervised_run_passes_its_status_and_output_through(repo_copy: Path) -> None:
    ran = run_specgen(repo_copy, "check")
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    (repo_copy / "generated" / "meta.py").write_text("# edited\n", encoding="utf-8")
    drift = run_specgen(repo_copy, "check")
    assert drift.returncode == 1 and "generated/meta.py is stale" in drift.stderr
