"""The generator's refusals of a bad table, template or configuration: exit 2, a message
naming the place and the fix, and no file touched (docs/contract.md §10).

Every run is in this process (tests.helpers.run_specgen_here): no case needs a real one.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from generator.__main__ import ExitStatus
from generator.config import load_config
from generator.emit import check_formatter
from generator.errors import GeneratorError
from shardplan.table.spec_fields import SPEC_FIELDS
from tests.helpers import (
    REPO,
    Edit,
    added_row_number,
    edit_add_field,
    edit_add_row,
    edit_append,
    edit_replace,
    edit_table,
    edit_write,
    line_of,
    run_specgen_here,
    snapshot,
)

ROW = {f.name: number for number, f in enumerate(SPEC_FIELDS, start=1)}  # name -> row number


TP_DIVIDE = (
    'SpecField("tp_divide_attrs", "tp_divide_attrs", GROUP_PARAM_PLAN, "attr_list", "attr_list"'
)

BAD_INPUTS: dict[str, tuple[Edit, str]] = {
    "unknown freeze kind": (
        edit_table(
            TP_DIVIDE, TP_DIVIDE.replace('"attr_list", "attr_list"', '"attr_lst", "attr_list"')
        ),
        f"table row {ROW['tp_divide_attrs']} (tp_divide_attrs): unknown freeze kind 'attr_lst'.\n"
        "  Known kinds: attr_list, bool, dict_copy",
    ),
    "unknown rebuild kind": (
        edit_table(
            TP_DIVIDE, TP_DIVIDE.replace('"attr_list", "attr_list"', '"attr_list", "atr_list"')
        ),
        "unknown rebuild kind 'atr_list'",
    ),
    "doc with a line break": (
        edit_table(
            'doc="Attributes divided by the TP degree; [] clears an inherited list."',
            'doc="Attributes divided by the TP degree;\\n[] clears an inherited list."',
        ),
        f"table row {ROW['tp_divide_attrs']} (tp_divide_attrs): doc 'Attributes divided by the "
        "TP degree;\\n[] clears an inherited list.' has a line break.\n  Write the doc on one line.",
    ),
    "doc with a backslash before a pipe": (
        edit_table(
            'doc="Attributes divided by the TP degree; [] clears an inherited list."',
            'doc="Attributes divided by the TP degree \\\\| [] clears an inherited list."',
        ),
        "(tp_divide_attrs): doc 'Attributes divided by the TP degree \\\\| [] clears an "
        "inherited list.' has a backslash before a pipe.\n  Write a plain |.",
    ),
    "duplicate name": (
        edit_add_row(
            'SpecField("params", "params_again", GROUP_PARAM_PLAN, "placement_map", "placement_map")'
        ),
        f"name 'params' already has row {ROW['params']}",
    ),
    "duplicate key": (
        edit_table('SpecField("in_dst", "in_dst"', 'SpecField("in_dst", "in_src"'),
        f"table row {ROW['in_dst']} (in_dst): key 'in_src' is already used by table row "
        f"{ROW['in_src']} (in_src)",
    ),
    "spec field with no row": (
        edit_table('    SpecField("_is_terminal", "", GROUP_EXEMPT),\n', ""),
        "field '_is_terminal' of shardplan.table.spec:ModuleShardingSpec has no table row",
    ),
    "row naming no field": (
        edit_add_row('SpecField("ghost", "ghost", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'),
        f"table row {ROW['_tp_local_attr_plan']} (ghost): the spec class has no field 'ghost'",
    ),
    "non-identifier name": (
        edit_add_row('SpecField("out-src", "out_src2", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'),
        "(out-src): name is not a Python identifier",
    ),
    "keyword name": (
        edit_add_row('SpecField("class", "klass", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'),
        "(class): name is not a Python identifier",
    ),
    "name shadowing the spec module's own": (
        edit_add_field(
            "field", 'SpecField("field", "field", GROUP_PARAM_PLAN, "scalar", "opt_scalar")'
        ),
        f"table row {added_row_number()} (field): name 'field' shadows a name the class's "
        "module binds (shardplan/table/spec.py imports it).\n  Rename the field (and its row).",
    ),
    "injections key the artifact format reserves": (
        edit_add_field(
            "matcher",
            'SpecField("matcher", "match", GROUP_INJECTIONS, "plain", "opt_scalar")',
        ),
        f"table row {added_row_number()} (matcher): key 'match' is reserved by the artifact "
        "format in injections: it names the module FQN a rule applies to.\n  Choose another key.",
    ),
    "exempt row with a key": (
        edit_table(
            'SpecField("_is_terminal", "", GROUP_EXEMPT)',
            'SpecField("_is_terminal", "terminal", GROUP_EXEMPT)',
        ),
        f"table row {ROW['_is_terminal']} (_is_terminal): a row of group 'exempt' has no key of "
        "its own",
    ),
    "exempt row with kinds": (
        edit_table(
            'SpecField("_needs_cp_attn", "", GROUP_EXEMPT)',
            'SpecField("_needs_cp_attn", "", GROUP_EXEMPT, "scalar")',
        ),
        f"table row {ROW['_needs_cp_attn']} (_needs_cp_attn): a row of group 'exempt' has no key",
    ),
    "post_init flag missing for an init=False field": (
        edit_table(
            '"deferred_bias_params", GROUP_PARAM_PLAN,\n              "name_list", "tuple_empty", post_init=True,',
            '"deferred_bias_params", GROUP_PARAM_PLAN,\n              "name_list", "tuple_empty",',
        ),
        f"table row {ROW['_deferred_bias_params']} (_deferred_bias_params): post_init=False but "
        "the dataclass field has init=False",
    ),
    "post_init flag on an init field": (
        edit_table(
            '"placement_map", "placement_map",\n',
            '"placement_map", "placement_map", post_init=True,\n',
        ),
        f"table row {ROW['params']} (params): post_init=True but the dataclass field has init=True",
    ),
    "unknown group": (
        edit_table(
            'SpecField("in_src", "in_src", GROUP_PARAM_PLAN',
            'SpecField("in_src", "in_src", "param_plans"',
        ),
        "unknown group 'param_plans'.\n  Known groups: param_plan, injections, exempt. Did you mean 'param_plan'?",
    ),
    "crossing row without a key": (
        edit_table('SpecField("out_names", "out_names"', 'SpecField("out_names", ""'),
        f"table row {ROW['out_names']} (out_names): a param_plan row needs the key",
    ),
    "table that is not a tuple": (
        edit_table(
            "if f.group != GROUP_EXEMPT)\n",
            "if f.group != GROUP_EXEMPT)\nSPEC_FIELDS = None  # type: ignore\n",
        ),
        "shardplan.table.spec_fields:SPEC_FIELDS is a NoneType, not a tuple",
    ),
    "table module that does not import": (
        edit_table('GROUPS = TABLE_GROUPS["spec"]', 'GROUPS = TABLE_GROUPS["spec"] +'),
        f"shardplan/table/spec_fields.py:{line_of('shardplan/table/spec_fields.py', 'GROUPS = TABLE_GROUPS')}: "
        "cannot import the table module 'shardplan.table.spec_fields': invalid syntax "
        "(spec_fields.py, line",
    ),
    "template with an undefined name": (
        edit_replace(
            "templates/freeze.py.j2",
            "from {{ kinds_module }} import",
            "from {{ kinds_modul }} import",
        ),
        f"templates/freeze.py.j2:{line_of('templates/freeze.py.j2', 'from {{ kinds_module }} import')}: "
        "'kinds_modul' is undefined",
    ),
    "template rendering invalid Python": (
        edit_replace(
            "templates/rebuild.py.j2",
            "    return __modules\n",
            "    return modules modules\n",
        ),
        "templates/rebuild.py.j2 rendered invalid Python at line",
    ),
    "black not pinned exactly": (
        edit_replace("pyproject.toml", '"black==26.10.1"', '"black>=26"'),
        "the `codegen` extra must pin black (",
    ),
}

# Bad configuration, templates and environments: each is one line, with the fix.
ONE_LINE_BAD_INPUTS: dict[str, tuple[Edit, str]] = {
    "declared output whose template is missing": (
        edit_write("templates/rebuild.py.j2", None),
        "generated/rebuild.py is a declared output, but its template templates/rebuild.py.j2 is "
        'missing: restore it, or remove "rebuild.py" from outputs in [tool.specgen]',
    ),
    "template of no declared output": (
        edit_write("templates/extra.py.j2", b"X = 1\n"),
        'templates/extra.py.j2 renders no declared output: add "extra.py" to outputs',
    ),
    "outputs not declared": (
        edit_replace("pyproject.toml", "\noutputs = [", "\nnot_outputs = ["),
        "[tool.specgen] outputs is missing; write it like outputs = [",
    ),
    "template that is not UTF-8": (
        edit_append("templates/freeze.py.j2", b"# caf\xe9\n"),
        f"templates/freeze.py.j2:{len((REPO / 'templates/freeze.py.j2').read_bytes().splitlines()) + 1}: "
        "byte 0xe9 is not UTF-8: save the file as UTF-8",
    ),
    "a setting the generator does not read": (
        edit_replace("pyproject.toml", "[tool.specgen]\n", '[tool.specgen]\ntable = "old"\n'),
        "[tool.specgen] has no setting `table`: remove it",
    ),
    "absolute output folder": (
        edit_replace("pyproject.toml", 'output = "generated"', 'output = "/tmp/specgen-generated"'),
        '[tool.specgen] output = "/tmp/specgen-generated" is an absolute path; give it '
        "relative to pyproject.toml",
    ),
    "output folder outside the project": (
        edit_replace("pyproject.toml", 'output = "generated"', 'output = "../outside"'),
        '[tool.specgen] output = "../outside" is not inside the project',
    ),
    "table module that calls sys.exit": (
        edit_table(
            'GROUPS = TABLE_GROUPS["spec"]',
            'GROUPS = TABLE_GROUPS["spec"]\nimport sys; sys.exit(3)',
        ),
        f"shardplan/table/spec_fields.py:{line_of('shardplan/table/spec_fields.py', 'GROUPS = TABLE_GROUPS') + 1}: "
        "cannot import the table module 'shardplan.table.spec_fields': it called sys.exit(3): "
        "remove the exit",
    ),
    "missing templates folder": (
        edit_write("templates", None),
        "the templates folder templates/ does not exist: restore it",
    ),
    "missing kinds template": (
        edit_write("templates/kinds.j2", None),
        "templates/kinds.j2 is missing: restore it",
    ),
    "broken TOML in the section header": (
        edit_replace("pyproject.toml", "[tool.specgen]\n", "[tool.specgen\n"),
        "pyproject.toml is not valid TOML: ",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_a_message_and_touches_nothing(repo_copy: Path, case: str) -> None:
    edit, message = BAD_INPUTS[case]
    edit(repo_copy)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy)
    assert result.returncode == ExitStatus.BAD_INPUT, result.stdout + result.stderr
    assert result.stderr.startswith("specgen: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo_copy / "generated") == before


@pytest.mark.parametrize("command", ["generate", "check"])
@pytest.mark.parametrize("case", list(ONE_LINE_BAD_INPUTS))
def test_bad_configuration_or_template_exits_2_with_one_line_and_touches_nothing(
    repo_copy: Path, case: str, command: str
) -> None:
    edit, message = ONE_LINE_BAD_INPUTS[case]
    edit(repo_copy)
    before = snapshot(repo_copy / "generated")
    result = run_specgen_here(repo_copy, command)
    assert result.returncode == ExitStatus.BAD_INPUT, result.stdout + result.stderr
    assert result.stderr.startswith("specgen: ") and len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert result.stdout == ""
    assert snapshot(repo_copy / "generated") == before
    assert not (repo_copy.parent / "outside").exists()


def test_broken_toml_is_reported_as_such_when_the_root_is_found_from_the_cwd(
    repo_copy: Path,
) -> None:
    ONE_LINE_BAD_INPUTS["broken TOML in the section header"][0](repo_copy)
    result = run_specgen_here(repo_copy, root_option=False)  # no --root: found from the cwd
    assert result.returncode == ExitStatus.BAD_INPUT
    assert re.fullmatch(
        r"specgen: \S+/pyproject\.toml is not valid TOML: .*\(at line \d+, column \d+\); "
        r"fix the file\n",
        result.stderr,
    )


def test_bad_table_reports_every_problem_at_once(repo_copy: Path) -> None:
    BAD_INPUTS["unknown freeze kind"][0](repo_copy)
    BAD_INPUTS["duplicate key"][0](repo_copy)
    result = run_specgen_here(repo_copy, "--check")
    assert result.returncode == 2
    assert (
        "unknown freeze kind 'attr_lst'" in result.stderr
        and "key 'in_src' is already used" in result.stderr
    )


def test_a_black_other_than_the_pinned_one_is_named_not_diffed() -> None:
    config = dataclasses.replace(load_config(REPO), black_pin="0.0.1")
    with pytest.raises(
        GeneratorError, match=r"black 26\.10\.1 is installed, not the pinned 0\.0\.1"
    ):
        check_formatter(config)
