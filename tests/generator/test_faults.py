"""Faults in the project's own files reach the user as one message naming the file and
line, exit 2, no traceback, nothing written (docs/contract.md §10): a syntax error in the spec module
(a merge conflict left behind), an exception raised while a template renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_specgen, snapshot

SPEC = "shardplan/table/spec.py"
CONFLICT = "<<<<<<< HEAD\nx = 1\n=======\nx = 2\n>>>>>>> other\n"


def assert_one_message(result: object, where: str) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.returncode == 2, result.stdout + stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr
    assert stderr.startswith(f"specgen: {where}"), stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


@pytest.mark.parametrize("command", ["generate", "check"])
def test_conflict_markers_in_the_spec_module_name_the_file_and_line(
    repo_copy: Path, command: str
) -> None:
    path = repo_copy / SPEC
    lines = path.read_text().splitlines(keepends=True)
    line = next(n for n, text in enumerate(lines) if text.startswith("class "))
    path.write_text("".join(lines[:line] + [CONFLICT] + lines[line:]))
    before = snapshot(repo_copy / "generated")
    result = run_specgen(repo_copy, command)
    assert_one_message(
        result,
        f"{SPEC}:{line + 1}: cannot import the class module 'shardplan.table.spec': invalid syntax",
    )
    assert snapshot(repo_copy / "generated") == before


@pytest.mark.parametrize(
    "template, first",
    [
        ("freeze.py.j2", True),  # an output's template
        ("table.lock.json.j2", True),  # the lock's template
        ("kinds.j2", False),  # the macros' module: its top level renders once, first
    ],
)
def test_an_expression_that_raises_in_a_template_names_the_template_and_line(
    repo_copy: Path, template: str, first: bool
) -> None:
    """Before: an expression raising at kinds.j2's top level escaped as a traceback, exit 1."""
    path = repo_copy / "templates" / template
    text = path.read_text()
    path.write_text("{{ 1 // 0 }}\n" + text if first else text + "{{ 1 // 0 }}\n")
    line = 1 if first else len(text.splitlines()) + 1
    before = snapshot(repo_copy / "generated")
    result = run_specgen(repo_copy, "generate")
    assert_one_message(result, f"templates/{template}:{line}: integer division or modulo by zero")
    assert snapshot(repo_copy / "generated") == before


def test_an_expression_that_raises_in_a_kinds_macro_names_the_template(repo_copy: Path) -> None:
    path = repo_copy / "templates" / "kinds.j2"
    text = path.read_text()
    anchor = "{% macro freeze("
    assert anchor in text, "test setup: kinds.j2 has no generic freeze macro"
    head, _, tail = text.partition(anchor)
    body_start = tail.index("%}") + 2
    path.write_text(head + anchor + tail[:body_start] + "{{ 1 // 0 }}" + tail[body_start:])
    result = run_specgen(repo_copy, "generate")
    line = head.count("\n") + 1  # the macro's first line, where the expression now is
    assert_one_message(result, f"templates/kinds.j2:{line}: integer division or modulo by zero")
