"""The contract lives in the repository (docs/contract.md): what the code cites exists, and
nothing cites a document outside the repository."""

from __future__ import annotations

import re
import subprocess

from tests.helpers import REPO

CONTRACT = REPO / "docs" / "contract.md"


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if listed.returncode == 0 and listed.stdout:
        names = listed.stdout.split()
    else:  # not a git checkout (an exported tree): every file but the venv's
        names = [
            p.relative_to(REPO).as_posix()
            for p in REPO.rglob("*")
            if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts
        ]
    suffixes = (".py", ".j2", ".md", ".toml", ".yaml", ".txt", ".ini")
    return [n for n in names if n.endswith(suffixes) and (REPO / n).is_file()]


def test_no_file_cites_the_spec_outside_the_repository() -> None:
    # Spelled in pieces, so this file does not cite what it looks for.
    spec = "SP" + "EC"
    outside = re.compile(rf"{spec} §|{spec}\.md|shared/{spec}|{spec}'s words")
    cited = [
        f"{name}:{number}"
        for name in _tracked_text_files()
        for number, line in enumerate((REPO / name).read_text(errors="replace").splitlines(), 1)
        if outside.search(line)
    ]
    assert cited == []


def test_every_section_of_the_contract_the_code_cites_exists() -> None:
    sections = set(re.findall(r"^## (§\w+) ", CONTRACT.read_text(), flags=re.MULTILINE))
    assert {"§2", "§2b", "§6", "§8", "§10", "§12"} <= sections
    cited = {
        (name, section)
        for name in _tracked_text_files()
        for citation in re.findall(
            r"docs/contract\.md ((?:§\w+(?:-§\w+|, §\w+)*))", (REPO / name).read_text()
        )
        for section in re.findall(r"§\w+", citation)
        if name != "docs/contract.md"  # it says how to cite it: "§N"
    }
    assert cited and {(n, s) for n, s in cited if s not in sections} == set()
