"""The generator's cache (generator/cache.py): a check on an up-to-date checkout neither
compiles a template nor runs black, and still finds every byte of drift; an entry that does
not match its digest, or a folder that cannot be written, only costs time.

The runs are real processes (``run_in``): what a fresh interpreter imports and compiles is
what the cache changes, and the in-process store would hide it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_in

# Runs `specgen check` (or generate) and reports what it had to compute: whether black was
# imported (it formats only what the cache lacks) and how many templates Jinja compiled.
PROBE = """
import json, sys
import jinja2
compiled = []
original = jinja2.Environment.compile
def counted(self, *args, **kwargs):
    compiled.append(args[1] if len(args) > 1 else kwargs.get("name"))
    return original(self, *args, **kwargs)
jinja2.Environment.compile = counted
from generator.__main__ import run
status = int(run(["--root", sys.argv[1], sys.argv[2]]))
print(json.dumps({"status": status, "black": "black" in sys.modules, "compiled": compiled}))
"""


def _probe(root: Path, command: str = "check") -> dict[str, object]:
    ran = run_in(root, "-c", PROBE, str(root), command)
    assert ran.returncode == 0, ran.stderr
    result: dict[str, object] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def test_a_warm_check_computes_nothing_and_still_finds_one_byte_of_drift(
    repo_copy: Path,
) -> None:
    first = _probe(repo_copy)
    assert first["status"] == 0 and first["black"] and first["compiled"]
    warm = _probe(repo_copy)
    assert warm == {"status": 0, "black": False, "compiled": []}

    rebuild = repo_copy / "generated" / "rebuild.py"
    text = rebuild.read_text(encoding="utf-8")
    at = text.index("def _rebuild_live_plan_from_meta")
    rebuild.write_text(text[:at] + text[at:].replace("meta", "mEta", 1), encoding="utf-8")
    drifted = _probe(repo_copy)
    assert drifted == {"status": 1, "black": False, "compiled": []}


def test_an_entry_that_does_not_match_its_digest_is_computed_again(repo_copy: Path) -> None:
    assert _probe(repo_copy)["status"] == 0
    entries = sorted((repo_copy / ".specgen-cache").iterdir())
    assert entries
    for entry in entries:
        check, _, data = entry.read_bytes().partition(b"\n")
        entry.write_bytes(check + b"\n" + data.replace(b"def ", b"dEf ") + b"# altered\n")
    again = _probe(repo_copy)
    # Every entry is refused: black formats again and every template is compiled again, and
    # generated/ still matches (an altered entry never becomes an expected output).
    assert again["status"] == 0 and again["black"] and again["compiled"]
    assert _probe(repo_copy) == {"status": 0, "black": False, "compiled": []}


def test_a_cache_folder_that_cannot_be_written_only_costs_time(repo_copy: Path) -> None:
    (repo_copy / ".specgen-cache").write_text("not a folder\n", encoding="utf-8")
    result = _probe(repo_copy)
    assert result["status"] == 0 and result["black"], result
    assert (repo_copy / ".specgen-cache").read_text(encoding="utf-8") == "not a folder\n"
