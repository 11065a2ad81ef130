"""``shardplan show`` and ``shardplan diff`` on real artifacts: the corpus's producers'
files, edited as a planner change would edit them, and read back through the command line.

In-process (``shardplan.cli.main``) where only the output and status matter; in a fresh
interpreter where what it imports matters.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from shardplan.cli import main
from tests.helpers import REPO

CORPUS = REPO / "tests" / "corpus"
DEEPSEEK = CORPUS / "deepseek_moe_codegen_meta.json"
OLDER = CORPUS / "older_planner_codegen_meta.json"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``shardplan args...`` in this process: status, stdout, stderr."""
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(status), out, err


def edited(tmp_path: Path, source: Path, name: str, edit: Any) -> Path:
    """A copy of ``source`` with ``edit(document)`` applied, written as the project writes."""
    document = json.loads(source.read_text())
    edit(document)
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


def first_layer_module(document: dict[str, Any], suffix: str) -> str:
    """The first module of the artifact whose name ends with ``suffix`` and holds params."""
    return next(
        fqn
        for fqn in sorted(document["param_plan"])
        if fqn.endswith(suffix) and document["param_plan"][fqn].get("params")
    )


# ---------------------------------------------------------------- show


def test_show_prints_the_mesh_then_one_sorted_line_per_module_and_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "show", DEEPSEEK)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    document = json.loads(DEEPSEEK.read_text())
    assert lines[0].startswith("mesh: ")
    for fqn, entry in document["param_plan"].items():
        for param, placement in (entry.get("params") or {}).items():
            text = " ".join(f"{axis}={placement[axis]}" for axis in sorted(placement))
            assert f"{fqn} params[{param}]: {text}" in lines
    module_lines = [line for line in lines if line.split(" ", 1)[0] in document["param_plan"]]
    assert module_lines == sorted(module_lines, key=_natural)
    assert run(capsys, "show", DEEPSEEK)[1] == out  # stable


def _natural(line: str) -> tuple[list[tuple[int, int, str]], str]:
    """A module's lines together, modules in natural order, each module's lines sorted."""
    name, _, rest = line.partition(" ")
    parts = [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in name.split(".")]
    return parts, rest


def test_show_orders_axes_as_the_mesh_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def mesh(document: dict[str, Any]) -> None:
        document["mesh_dim_names"] = ["tp", "cp"]

    path = edited(tmp_path, DEEPSEEK, "meta.json", mesh)
    out = run(capsys, "show", path)[1]
    assert out.startswith("mesh: tp cp\n")
    assert "lm_head params[weight]: tp=S(0) cp=R dp=R ep=R\n" in out


def test_show_collapse_folds_modules_that_differ_only_by_a_layer_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = json.loads(DEEPSEEK.read_text())
    layers = {
        int(m[1])
        for fqn in document["param_plan"]
        if (m := re.match(r"model\.layers\.(\d+)\.", fqn))
    }
    status, out, _ = run(capsys, "show", "--collapse", DEEPSEEK)
    assert status == 0
    plain = run(capsys, "show", DEEPSEEK)[1]
    assert len(out.splitlines()) < len(plain.splitlines())
    # Every line of the plain output is one folded line expanded, and back.
    assert set(_expanded(out.splitlines())) == set(plain.splitlines())
    assert len(layers) > 1 and any(
        f"model.layers.[{min(layers)}-" in line for line in out.splitlines()
    )


def expand_name(name: str) -> list[str]:
    """Every name a folded name stands for: ``a.[0-2,5].b`` -> a.0.b, a.1.b, a.2.b, a.5.b;
    ``[0-8/4]`` -> 0, 4, 8. The test's own reading of the notation."""
    found = re.search(r"\[([0-9,/-]+)\]", name)
    if not found:
        return [name]
    numbers: list[int] = []
    for part in found[1].split(","):
        span, _, step = part.partition("/")
        first, _, last = span.partition("-")
        numbers += range(int(first), int(last or first) + 1, int(step or 1))
    return [
        expanded
        for n in numbers
        for expanded in expand_name(name[: found.start()] + str(n) + name[found.end() :])
    ]


def _expanded(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        name, space, rest = line.partition(" ")
        if name in ("mesh:", "plan", "other"):
            out.append(line)
        else:
            out += [n + space + rest for n in expand_name(name)]
    return out


def test_fold_writes_steps_and_keeps_lone_numbers() -> None:
    from shardplan.review.fold import fold, ranges

    assert ranges([0, 4, 8, 12]) == "0-12/4"
    assert ranges([1, 2, 3, 5, 6, 7]) == "1-3,5-7"
    assert ranges([3, 7]) == "3,7"
    items = [("", f"l.{i}.e.{j}", " x") for i in range(2) for j in range(3)] + [
        ("", "l.9.e.0", " y")
    ]
    assert sorted(fold(items)) == [("", "l.9.e.0", " y"), ("", "l.[0-1].e.[0-2]", " x")]


def test_natural_key_orders_numbers_by_value_and_a_folded_range_by_its_first() -> None:
    from shardplan.review.fold import natural_key

    names = ["l.10.a", "l.2.a", "l.[0-31].a", "l.1.b", "x[10]", "x[9]", "l.b"]
    assert sorted(names, key=natural_key) == [
        *("l.[0-31].a", "l.1.b", "l.2.a", "l.10.a", "l.b", "x[9]", "x[10]")
    ]


# Names as a plan could hold them: dots, numbers (with leading zeros), brackets, newlines.
odd_names = st.text(alphabet="ab.[-0179\n", max_size=12)


@given(odd_names)
def test_natural_key_made_by_segments_is_the_whole_names_key(name: str) -> None:
    """The law: each number, with the bracket before it, padded to 20 digits, wherever
    it stands (the segment cache changes nothing)."""
    from shardplan.review.fold import natural_key

    assert natural_key(name) == re.sub(r"\[?([0-9]+)", lambda m: m[1].zfill(20), name)


@given(odd_names)
def test_a_names_last_number_is_found_as_the_regular_expression_finds_it(name: str) -> None:
    """The law: splitting at the last dots finds what ``_LAST_NUMBER`` finds."""
    from shardplan.review.fold import _LAST_NUMBER, _last_number

    found = _LAST_NUMBER.match(name)
    assert _last_number(name) == (None if found is None else found.groups())


@given(st.lists(odd_names, max_size=20))
def test_natural_sorted_sorts_by_the_natural_key_then_the_text(names: list[str]) -> None:
    """The law: ``natural_sorted`` is ``sorted`` by (natural key, text), so names whose
    keys tie (``07``, ``7``) come out in one order, run after run."""
    from shardplan.review.fold import natural_key, natural_sorted

    assert natural_sorted(names) == sorted(names, key=lambda n: (natural_key(n), n))


# ---------------------------------------------------------------- diff


def test_diff_names_a_changed_placement(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = json.loads(DEEPSEEK.read_text())
    fqn = first_layer_module(document, ".self_attn")
    param = sorted(document["param_plan"][fqn]["params"])[0]
    before = document["param_plan"][fqn]["params"][param]["tp"]
    after = "R" if before != "R" else "S(0)"

    def change(d: dict[str, Any]) -> None:
        d["param_plan"][fqn]["params"][param]["tp"] = after

    new = edited(tmp_path, DEEPSEEK, "new.json", change)
    status, out, err = run(capsys, "diff", DEEPSEEK, new)
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert len(lines) == 2 and lines[1] == "1 change"
    assert lines[0].startswith(f"{fqn} params[{param}]: placement changed: ")
    assert (
        f"tp={before}" in lines[0].split(" -> ")[0] and f"tp={after}" in lines[0].split(" -> ")[1]
    )


def test_diff_names_an_added_module_and_an_added_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def add(d: dict[str, Any]) -> None:
        d["param_plan"]["model.extra_head"] = {"params": {"weight": {"tp": "S(0)"}}}
        d["injections"].append({"match": "model.extra_head", "ep_size": 2})

    new = edited(tmp_path, DEEPSEEK, "new.json", add)
    status, out, _ = run(capsys, "diff", DEEPSEEK, new)
    assert status == 1
    assert "model.extra_head: module added\n" in out
    assert 'model.extra_head rule: rule added: {"ep_size": 2}\n' in out
    # Removed, the other way round.
    status, out, _ = run(capsys, "diff", new, DEEPSEEK)
    assert status == 1 and "model.extra_head: module removed\n" in out
    assert "model.extra_head rule: rule removed" in out


def test_diff_names_a_rule_changed_and_a_plan_field_changed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = json.loads(DEEPSEEK.read_text())
    rule = next(r for r in document["injections"] if "ep_size" in r)

    def change(d: dict[str, Any]) -> None:
        next(r for r in d["injections"] if r["match"] == rule["match"])["ep_size"] = 4
        d["parallel_dims"]["loss_parallel"] = not d["parallel_dims"]["loss_parallel"]

    new = edited(tmp_path, DEEPSEEK, "new.json", change)
    status, out, _ = run(capsys, "diff", DEEPSEEK, new)
    assert status == 1
    assert f"{rule['match']} rule.ep_size: rule changed: {rule['ep_size']} -> 4\n" in out
    loss = json.dumps(document["parallel_dims"]["loss_parallel"])
    assert f"plan parallel_dims.loss_parallel: plan field changed: {loss} -> " in out


def test_diff_of_the_same_plan_reserialized_is_no_change_and_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = json.loads(DEEPSEEK.read_text())

    # Another producer's writing: compact, keys in reverse, rules in reverse, an extra key.
    def backwards(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: backwards(value[k]) for k in reversed(list(value))}
        return [backwards(v) for v in value] if isinstance(value, list) else value

    compact = tmp_path / "compact.json"
    reordered = backwards(document)
    reordered["injections"].reverse()
    compact.write_text(json.dumps(reordered, separators=(",", ":")))
    status, out, _ = run(capsys, "diff", DEEPSEEK, compact)
    assert status == 0
    assert out.strip() == "same plan: the injection rules are in another order"
    compact.write_text(json.dumps(backwards(document), separators=(",", ":")))
    assert run(capsys, "diff", DEEPSEEK, compact)[:2] == (
        0,
        "same plan: the bytes differ only in layout (key order, indentation or spacing)\n",
    )
    document["signature"] = "another producer's"
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(document, indent=4))
    status, out, _ = run(capsys, "diff", DEEPSEEK, extra)
    assert (status, out.strip()) == (
        0,
        "same plan: keys no row owns differ (not part of the plan): signature",
    )
    indented = tmp_path / "indented.json"
    indented.write_text(json.dumps(json.loads(DEEPSEEK.read_text()), indent=1))
    assert run(capsys, "diff", DEEPSEEK, indented)[:2] == (
        0,
        "same plan: the bytes differ only in layout (key order, indentation or spacing)\n",
    )
    assert run(capsys, "diff", DEEPSEEK, DEEPSEEK)[:2] == (
        0,
        "same plan: the files are identical\n",
    )


@pytest.mark.parametrize("case", ["missing", "not JSON", "not an artifact"])
def test_diff_of_a_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    bad = tmp_path / "bad.json"
    if case == "not JSON":
        bad.write_text("param_plan: {}\n")
    elif case == "not an artifact":
        bad.write_text('{"param_plan": {"m": 3}}')
    for args in (("diff", DEEPSEEK, bad), ("diff", bad, DEEPSEEK), ("show", bad)):
        status, out, err = run(capsys, *args)
        assert (status, out) == (2, "")
        assert err.count("\n") == 1 and err.startswith("shardplan: ") and str(bad) in err
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("injections", "message"),
    [
        ([{"ep_size": 2}], "injections[0]: expected an object with a 'match' string"),
        ([{"match": "m"}, 3], "injections[1]: expected an object with a 'match' string"),
        ([{"match": "m"}, {"match": "m"}], "injections[1]: a second rule for 'm';"),
    ],
    ids=["no_match", "not_an_object", "second_rule"],
)
def test_a_bad_rule_is_one_line_naming_it_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, injections: list[Any], message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"param_plan": {"m": {}}, "injections": injections}))
    for args in (("show", bad), ("diff", DEEPSEEK, bad)):
        status, out, err = run(capsys, *args)
        assert (status, out) == (2, "")
        assert err.count("\n") == 1 and message in err and str(bad) in err


def test_diff_json_gives_the_changes_for_tools(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = json.loads(DEEPSEEK.read_text())
    mlps = sorted(f for f in document["param_plan"] if re.fullmatch(r"model\.layers\.\d+\.mlp", f))

    def change(d: dict[str, Any]) -> None:
        for fqn in mlps:
            d["param_plan"][fqn]["is_boundary"] = not d["param_plan"][fqn].get("is_boundary", True)

    new = edited(tmp_path, DEEPSEEK, "new.json", change)
    status, out, _ = run(capsys, "diff", "--json", DEEPSEEK, new)
    found = json.loads(out)
    assert status == 1 and found["same_plan"] is False
    assert sorted(c["module"] for c in found["changes"]) == mlps
    assert {c["field"] for c in found["changes"]} == {"is_boundary"}
    assert {c["change"] for c in found["changes"]} <= {"field changed", "field added"}
    assert all(c["new"] != c.get("old") for c in found["changes"])
    # Folded: one change for the layers that changed alike.
    status, out, _ = run(capsys, "diff", "--collapse", DEEPSEEK, new)
    lines = out.splitlines()
    assert status == 1 and len(lines) < len(mlps) + 1
    assert set(_expanded_changes(lines[:-1])) == set(
        run(capsys, "diff", DEEPSEEK, new)[1].splitlines()[:-1]
    )
    folded = json.loads(run(capsys, "diff", "--json", "--collapse", DEEPSEEK, new)[1])
    assert sorted(m for c in folded["changes"] for m in expand_name(c["module"])) == mlps


def _expanded_changes(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        name, sep, rest = re.match(r"([^ :]+)([ :])(.*)", line).groups()  # type: ignore[union-attr]
        out += [n + sep + rest for n in expand_name(name)]
    return out


# ---------------------------------------------------------------- the page


class _Modules(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.modules: list[str] = []
        self.tags: set[str] = set()
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if tag == "tbody" and found.get("data-module"):
            self.modules.append(str(found["data-module"]))
        self.sources += [str(v) for k, v in attrs if k in ("src", "href") and v]


@pytest.mark.parametrize("source", [DEEPSEEK, OLDER], ids=lambda p: p.name)
def test_the_page_holds_every_module_and_needs_no_network(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: Path
) -> None:
    page = tmp_path / "plan.html"
    status, out, _ = run(capsys, "show", source, "--html", page)
    assert status == 0 and str(page) in out
    parser = _Modules()
    parser.feed(page.read_text())
    document = json.loads(source.read_text())
    named = [n for folded in parser.modules for n in expand_name(folded)]
    assert sorted(named) == sorted(
        {*document["param_plan"], *(r["match"] for r in document["injections"])}
    )
    assert parser.sources == [] and "script" not in parser.tags  # nothing fetched, nothing run
    text = page.read_text()
    assert "background:" in text and "S(0)" in text


# ---------------------------------------------------------------- git and fresh interpreters


def _docs_git_lines() -> tuple[str, list[str]]:
    """The .gitattributes line and the git command docs/artifacts.md gives."""
    from tests.docblocks import blocks

    found = [
        b
        for b in blocks(REPO / "docs" / "artifacts.md")
        if "textconv" in b.code or "diff=shardplan" in b.code
    ]
    attributes = next(b.code.strip() for b in found if b.language == "gitattributes")
    command = next(b.code.strip() for b in found if b.language == "sh")
    return attributes, command.split()


@pytest.mark.processes
def test_git_diff_reads_artifacts_as_shardplan_show(tmp_path: Path) -> None:
    attributes, command = _docs_git_lines()
    assert command[:3] == ["git", "config", "diff.shardplan.textconv"]
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}

    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if "venv" not in p]

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            env={**_env(), **env, "PATH": os.pathsep.join(path)},
            check=True,
        )
        return done.stdout

    git("init", "-q")
    # The docs' command as written, run by the shell in the clone's root, whose .venv is
    # this checkout's, never activated: no venv's bin folder on PATH.
    (repo / ".venv").symlink_to(Path(sys.executable).parent.parent)
    subprocess.run(
        ["sh", "-c", " ".join(command)],
        cwd=repo,
        env={**_env(), **env, "PATH": os.pathsep.join(path)},
        check=True,
    )
    (repo / ".gitattributes").write_text(attributes + "\n")
    artifact = repo / "codegen_meta.json"
    artifact.write_text(DEEPSEEK.read_text())
    git("add", ".")
    git("commit", "-qm", "plan")
    document = json.loads(DEEPSEEK.read_text())
    fqn = first_layer_module(document, ".self_attn")
    param = sorted(document["param_plan"][fqn]["params"])[0]
    document["param_plan"][fqn]["params"][param]["tp"] = "P(max)"
    artifact.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    diff = git("diff")
    changed = [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert len(changed) == 2, diff
    assert changed[0].startswith(f"-{fqn} params[{param}]: ")
    assert changed[1].startswith(f"+{fqn} params[{param}]: ") and "tp=P(max)" in changed[1]
    git("commit", "-qam", "max")
    log = git("log", "-p", "-1")
    assert f"+{fqn} params[{param}]: " in log and '"tp": "P(max)"' not in log


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


@pytest.mark.processes
def test_show_diff_and_the_page_import_no_torch(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    code = (
        "import sys; from shardplan.cli import main\n"
        f"assert main(['show', {str(DEEPSEEK)!r}]) == 0\n"
        f"assert main(['show', '--collapse', {str(DEEPSEEK)!r}, '--html', {str(page)!r}]) == 0\n"
        f"assert main(['diff', '--json', {str(DEEPSEEK)!r}, {str(OLDER)!r}]) == 1\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    module = subprocess.run(
        [sys.executable, "-m", "shardplan", "diff", str(DEEPSEEK), str(tmp_path / "missing.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert module.returncode == 2 and module.stdout == ""
    assert (
        module.stderr
        == f"shardplan: cannot read {tmp_path / 'missing.json'}: No such file or directory\n"
    )


def test_show_and_diff_hold_ints_beyond_64_bits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    big = 2**70

    def stack(d: dict[str, Any]) -> None:
        d["injections"][0]["ep_stack"] = {"tokens": big}

    old = edited(tmp_path, DEEPSEEK, "old.json", stack)
    match = json.loads(old.read_text())["injections"][0]["match"]
    assert f'{match} rule.ep_stack: {{"tokens": {big}}}\n' in run(capsys, "show", old)[1]

    def bigger(d: dict[str, Any]) -> None:
        stack(d)
        d["injections"][0]["ep_stack"]["tokens"] += 1

    new = edited(tmp_path, DEEPSEEK, "new.json", bigger)
    status, out, _ = run(capsys, "diff", old, new)
    assert status == 1
    assert (
        f'{match} rule.ep_stack: rule changed: {{"tokens": {big}}} -> {{"tokens": {big + 1}}}'
        in out
    )


def test_diff_reads_the_same_without_fork(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the old file is read by a child process (fork) and where both are read here,
    the changes and notes are the same, bad input included."""
    import os

    def change(d: dict[str, Any]) -> None:
        d["param_plan"]["lm_head"]["is_boundary"] = False
        d["param_plan"].pop(sorted(d["param_plan"])[-1])
        d["signature"] = "x"

    new = edited(tmp_path, DEEPSEEK, "new.json", change)
    missing = tmp_path / "missing.json"
    cases = [
        ("diff", DEEPSEEK, new),
        ("diff", "--json", new, DEEPSEEK),
        ("diff", DEEPSEEK, missing),
    ]
    forked = [run(capsys, *case) for case in cases]
    monkeypatch.delattr(os, "fork")
    assert [run(capsys, *case) for case in cases] == forked
    assert [status for status, _, _ in forked] == [1, 1, 2]
    last = forked[0][1].splitlines()[-1]
    assert last == "2 changes; also: keys no row owns differ (not part of the plan): signature"


def test_a_page_that_cannot_be_written_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for out in (tmp_path / "no such folder" / "p.html", tmp_path):
        status, stdout, err = run(capsys, "show", DEEPSEEK, "--html", out)
        assert (status, stdout) == (2, "")
        assert err.startswith("shardplan: --html") and err.count("\n") == 1 and str(out) in err
    assert sorted(tmp_path.iterdir()) == []


def test_diff_writes_both_sides_of_a_placement_in_one_axis_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def remesh(d: dict[str, Any]) -> None:
        d["mesh_dim_names"] = ["tp", "cp"]
        d["param_plan"]["lm_head"]["params"]["weight"]["tp"] = "R"

    new = edited(tmp_path, DEEPSEEK, "new.json", remesh)
    out = run(capsys, "diff", DEEPSEEK, new)[1]
    line = next(x for x in out.splitlines() if x.startswith("lm_head params[weight]"))
    before, after = line.partition(": placement changed: ")[2].split(" -> ")
    assert [p.split("=")[0] for p in before.split()] == [p.split("=")[0] for p in after.split()]
    assert after.startswith("tp=R cp=R")


def test_the_lines_docs_artifacts_md_shows_are_shows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from benchmarks.plans import llama_plan
    from shardplan import write_plan
    from tests.docblocks import blocks

    (block,) = [b for b in blocks(REPO / "docs" / "artifacts.md") if "shardplan show" in b.marker]
    path = tmp_path / "codegen_meta.json"
    write_plan(llama_plan(2), path)
    shown = run(capsys, "show", path)[1].splitlines()
    assert set(block.code.splitlines()) <= set(shown)
