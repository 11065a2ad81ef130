"""The docs (README.md and docs/*.md) say what is true now, and cannot drift from the code.

- The contract's sections the code cites exist, and nothing cites a document outside the
  repository.
- Tables that restate code are checked against it: the kinds (docs/contract.md §4), the
  command-line options (docs/cli.md). A new kind or option without its row fails here.
- Every ```python block runs (blocks of one page share a namespace, in a fresh folder);
  every ```sh block's commands name what exists, and the cheap read-only ones run.
- Every relative link resolves; no commit hash, issue number or dated anecdote.

How a block is run can be said in an HTML comment on the lines just before its fence:
``<!-- docs-test: fragment of PATH -->`` (an excerpt of PATH, which must exist: it is
compiled, not run), ``<!-- docs-test: needs mesh ... -->`` (run with ``model``, ``plan``
and ``mesh``, a 1-process gloo mesh over "tp", in its namespace) or ``<!-- docs-test:
needs artifact ... -->`` (run with ``plan``, the example plan, and ``path``, its artifact).
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docblocks import Block, blocks
from tests.helpers import REPO, run_specgen_here

CONTRACT = REPO / "docs" / "contract.md"
CLI_PAGE = REPO / "docs" / "cli.md"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


# ---------------------------------------------------------------- the code cites the contract


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


# ---------------------------------------------------------------- tables checked against code


def test_the_field_reference_lists_every_kind_name_with_its_records() -> None:
    """generated/fields.md's "Kind names" (rendered from the kinds module, so `make check`
    keeps it fresh) has a row for every name, naming the functions it calls."""
    from shardplan.table.kinds import KIND_NAMES

    section = (REPO / "generated" / "fields.md").read_text().partition("## Kind names")[2]
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `(\w+)` \|.*$", section, re.M)}
    assert set(rows) == set(KIND_NAMES)
    for name, kind in KIND_NAMES.items():
        if kind.freeze:
            assert f"`freeze_{kind.freeze.record}`" in rows[name], name
        if kind.rebuild:  # a derived key's record checks instead
            assert re.search(rf"`(rebuild|check)_{kind.rebuild.record}`", rows[name]), name


def test_every_kind_record_has_a_row_in_the_contracts_records_table() -> None:
    from shardplan.table.kinds import KINDS

    records = set(KINDS)
    section = CONTRACT.read_text().partition("## §4")[2].partition("<!-- kinds table")[0]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    assert rows == records, f"records missing from §4: {records - rows}; gone: {rows - records}"


def _specgen_options() -> dict[str, set[str]]:
    """Every command of specgen's parser and the options it shows, by command ('' for
    none); the options it hides (argparse.SUPPRESS) are there only to be refused."""
    import argparse

    from generator.__main__ import _parser

    def shown(parser: argparse.ArgumentParser) -> set[str]:
        return {
            option
            for action in parser._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
        }

    parser = _parser()
    options = {"": shown(parser)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                options[name] = shown(sub)
    return options


def _demo_options() -> set[str]:
    """shardplan-demo's shown options, read from its source (the demo imports torch)."""
    tree = ast.parse((REPO / "shardplan" / "examples" / "demo.py").read_text())
    options = {"-h", "--help"}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "add_argument":
            hidden = any(
                k.arg == "help"
                and isinstance(k.value, ast.Attribute)
                and k.value.attr == "SUPPRESS"
                for k in call.keywords
            )
            if not hidden:
                options |= {a.value for a in call.args if isinstance(a, ast.Constant)}
    return options


def test_every_specgen_command_and_option_is_in_the_cli_page() -> None:
    text = CLI_PAGE.read_text().partition("## shardplan-demo")[0]
    named = set(re.findall(r"`(?:specgen )?(-{0,2}[\w-]+)[^`]*`", text))
    missing = {
        f"{command} {option}".strip()
        for command, options in _specgen_options().items()
        for option in {command, *options} - {""}
        if option not in named
    }
    assert missing == set(), f"docs/cli.md does not name: {sorted(missing)}"


def test_every_shardplan_command_and_option_is_in_the_cli_page() -> None:
    import argparse

    from shardplan.cli import _parser

    text = CLI_PAGE.read_text().partition("## shardplan\n")[2].partition("## shardplan-demo")[0]
    named = set(re.findall(r"`(?:shardplan )?(-{0,2}[\w-]+)[^`]*`", text))
    shown = set()
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                shown.add(name)
                shown |= {o for a in sub._actions for o in a.option_strings}
    assert shown - named == set(), f"docs/cli.md's shardplan section does not name {shown - named}"


def test_the_torchrun_options_the_docs_use_are_torchruns() -> None:
    from torch.distributed.run import get_args_parser

    known = {o for a in get_args_parser()._actions for o in a.option_strings}
    assert TORCHRUN_OPTIONS <= known


def test_every_demo_option_is_in_the_cli_page() -> None:
    text = CLI_PAGE.read_text().partition("## shardplan-demo")[2]
    named = set(re.findall(r"`(-{1,2}[\w-]+)", text))
    assert _demo_options() - named == set()


# ---------------------------------------------------------------- the code blocks run


def _compiles_as_an_excerpt(code: str) -> bool:
    """Whether ``code`` is Python as it stands in its file: statements, or the entries of
    a dict or a list literal (a table row, a decision)."""
    for wrapped in (code, "{\n" + code + "\n}", "[\n" + code + "\n]"):
        try:
            compile(wrapped, "<excerpt>", "exec")
        except SyntaxError:
            continue
        return True
    return False


@pytest.fixture
def mesh_namespace() -> Iterator[dict[str, Any]]:
    """The example model, its plan and a 1-process gloo mesh over "tp", torn down after."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from shardplan.examples.llama import LlamaConfig, LlamaForCausalLM
    from shardplan.examples.plan import tensor_parallel_plan

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        config = LlamaConfig()
        yield {
            "model": LlamaForCausalLM(config),
            "plan": tensor_parallel_plan(config),
            "mesh": init_device_mesh("cpu", (1,), mesh_dim_names=("tp",)),
        }
    finally:
        dist.destroy_process_group()


def _artifact_namespace() -> dict[str, Any]:
    """The example plan and its artifact, written in the current (the test's) folder."""
    from shardplan.api import write_plan
    from shardplan.examples.llama import LlamaConfig
    from shardplan.examples.plan import tensor_parallel_plan

    plan = tensor_parallel_plan(LlamaConfig())
    write_plan(plan, "codegen_meta.json")
    return {"plan": plan, "path": "codegen_meta.json"}


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_python_block_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The page's python blocks, in order, in one namespace, in an empty folder; an
    excerpt of a file is compiled and its file must exist."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.language != "python":
            continue
        if block.marker.startswith("fragment of "):
            path = block.marker.removeprefix("fragment of ").split()[0]
            assert (REPO / path).is_file(), f"{block.where()}: no file {path}"
            assert _compiles_as_an_excerpt(block.code), f"{block.where()}: not Python"
            continue
        if block.marker.startswith("needs mesh"):
            namespace.update(request.getfixturevalue("mesh_namespace"))
        elif block.marker.startswith("needs artifact"):
            namespace.update(_artifact_namespace())
        else:
            assert block.marker == "", f"{block.where()}: unknown marker {block.marker!r}"
        try:
            exec(compile(block.code, block.where(), "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{block.where()}: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_examples_import_from_the_front_door(page: Path) -> None:
    """What a reader copies imports from ``shardplan`` itself (or the examples), never
    from where a name happens to live today."""
    deep = [
        f"{block.where()}: {node.module}"
        for block in blocks(page)
        if block.language == "python" and not block.marker.startswith("fragment of ")
        for node in ast.walk(ast.parse(block.code))
        if isinstance(node, ast.ImportFrom)
        if node.module != "shardplan" and not (node.module or "").startswith("shardplan.examples")
    ] + [
        f"{block.where()}: import {alias.name}"
        for block in blocks(page)
        if block.language == "python" and not block.marker.startswith("fragment of ")
        for node in ast.walk(ast.parse(block.code))
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name != "shardplan"
    ]
    assert deep == []


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", text, re.M))


def _tox_envs() -> set[str]:
    text = (REPO / "tox.ini").read_text()
    listed = re.search(r"^env_list = (.*)$", text, re.M)
    return set(re.findall(r"[\w-]+", listed[1])) if listed else set()


# The torchrun options the docs use (torch.distributed.run's, checked against its parser).
TORCHRUN_OPTIONS = {
    "--standalone",
    "--nproc-per-node",
    "--nnodes",
    "--rdzv-backend",
    "--rdzv-endpoint",
    "--rdzv-id",
}
# Commands a sh block may hold that are not this repository's: nothing to check.
NOT_OURS = {"git", "pip", "rm", "cd"}
READ_ONLY = {"table", "check"}  # specgen commands cheap and safe to run in place


def _commands(block: Block) -> Iterator[list[str]]:
    for line in block.code.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        for command in filter(None, (c.strip() for c in line.split("&&"))):
            words = shlex.split(command)
            while words and re.fullmatch(r"\w+=.*", words[0]):  # VAR=value prefixes
                words.pop(0)
            if words:
                yield words


def _check_command(words: list[str], where: str) -> None:
    program = words[0].removeprefix(".venv/bin/")
    args = words[1:]
    if program == "python" and args[:2] == ["-m", "generator"]:
        program, args = "specgen", args[2:]
    if program == "make":
        targets = {a for a in args if "=" not in a and not a.startswith("-")}  # not VAR=value
        assert targets <= _make_targets(), f"{where}: no make target {targets}"
    elif program == "tox":
        envs = args[args.index("-e") + 1].split(",") if "-e" in args else []
        assert set(envs) <= _tox_envs(), f"{where}: no tox env {envs}"
    elif program == "specgen":
        from generator.__main__ import _parser

        try:
            _parser().parse_args(args)
        except SystemExit as exc:
            raise AssertionError(f"{where}: specgen {' '.join(args)}: a usage error") from exc
        command = next((a for a in args if not a.startswith("-")), "generate")
        if command in READ_ONLY:
            ran = run_specgen_here(REPO, *args)
            assert ran.returncode == 0, f"{where}: specgen {' '.join(args)}\n{ran.stderr}"
    elif program == "shardplan-demo":
        options = {a.partition("=")[0] for a in args if a.startswith("-")}
        assert options <= _demo_options(), f"{where}: shardplan-demo has no {options}"
    elif program == "shardplan":
        from shardplan.cli import BadInput, _parser

        if args[:1] == ["demo"]:
            options = {a for a in args[1:] if a.startswith("-")}
            assert options <= _demo_options(), f"{where}: shardplan demo has no {options}"
            return
        try:
            _parser().parse_args(args)
        except (BadInput, SystemExit) as exc:
            raise AssertionError(f"{where}: shardplan {' '.join(args)}: a usage error") from exc
    elif program == "torchrun":
        # torchrun's own options, then the module it runs and that module's options.
        assert "-m" in args, f"{where}: torchrun runs no module"
        module, options = args[args.index("-m") + 1], args[args.index("-m") + 2 :]
        assert module == "shardplan.examples.demo", f"{where}: torchrun runs {module}"
        shown = {a for a in options if a.startswith("-")}
        assert shown <= _demo_options(), f"{where}: the demo has no {shown}"
        launcher = set(a.partition("=")[0] for a in args[: args.index("-m")] if a.startswith("-"))
        assert (
            launcher <= TORCHRUN_OPTIONS
        ), f"{where}: torchrun has no {launcher - TORCHRUN_OPTIONS}"
    else:
        assert program in NOT_OURS, f"{where}: {program}: classify it in tests/test_docs.py"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_shell_command_names_what_exists(page: Path) -> None:
    """make targets, tox environments, specgen commands and options, shardplan-demo
    options: each exists; `specgen table` and `specgen check` run here and pass."""
    for block in blocks(page):
        if block.language == "sh":
            for words in _commands(block):
                _check_command(words, block.where())


# ---------------------------------------------------------------- links and words


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    broken = [
        target
        for target in targets
        if not re.match(r"[a-z]+:", target) and not target.startswith("#")
        if not (page.parent / target.partition("#")[0]).exists()
    ]
    assert broken == [], f"{_page_id(page)}: links to nothing: {broken}"


NOT_NOW = [
    # A commit hash: 7 to 12 hex digits, a letter and a digit among them.
    re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\b"),
    re.compile(r"\b(?:issue|PR|pull request)s? #?\d+|(?<![\w&])#\d+\b", re.I),
    re.compile(
        r"\bon a day\b|\blast time\b|\bthe day of\b|\byesterday\b|\bthis morning\b"
        r"|\blast (?:week|month)\b|\b20\d\d-\d\d-\d\d\b",
        re.I,
    ),
]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_no_commit_hash_issue_number_or_anecdote(page: Path) -> None:
    """The docs say what is true now: no commit to look up, no tracker, no diary."""
    found = [
        f"{_page_id(page)}:{number}: {hit[0]}"
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for pattern in NOT_NOW
        for hit in [pattern.search(line)]
        if hit
    ]
    assert found == []


def test_the_readme_stays_a_ten_minute_read() -> None:
    assert len((REPO / "README.md").read_bytes()) <= 15_000
