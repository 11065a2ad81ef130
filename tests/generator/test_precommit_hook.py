"""This repository's own pre-commit drift hook (.pre-commit-config.yaml) runs whenever a
file the generator reads, or writes, is staged.

The list is derived from ``[tool.specgen]`` and from what a generator run actually
imports, so a table, format or kinds module moved or added there shows up here. The run
is in this process (tests.helpers.project_imported_from).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from generator.config import load_config
from generator.emit import compare
from generator.pipeline import generate
from tests.helpers import REPO, project_imported_from

HOOKS = REPO / ".pre-commit-config.yaml"


def _drift_hook_pattern() -> re.Pattern[str]:
    """The ``files:`` regex of the specgen-check hook (the file is read as text: no YAML
    parser is a dependency)."""
    text = HOOKS.read_text()
    hook = text[text.index("- id: specgen-check") :]
    match = re.search(r"^\s+files:\s*(\S+)\s*$", hook, flags=re.MULTILINE)
    assert match, "the specgen-check hook has no files: pattern"
    return re.compile(match[1])


def _module_file(dotted: str) -> str:
    return dotted.partition(":")[0].replace(".", "/") + ".py"


def _configured_inputs() -> list[str]:
    """Every file [tool.specgen] names as an input (the kinds module's functions module
    too), and one file of each folder it names."""
    config = load_config(REPO)
    functions = importlib.import_module(config.kinds).FUNCTIONS
    files = ["pyproject.toml", _module_file(config.format), _module_file(config.kinds)]
    files.append(_module_file(functions))
    for table in config.tables:
        files += [_module_file(table.rows), _module_file(table.retired), _module_file(table.cls)]
    templates = sorted(p for p in config.templates.rglob("*") if p.is_file())
    generator_files = sorted((REPO / "generator").glob("*.py"))
    outputs = [config.output / name for name in config.outputs]
    for path in (*templates, *generator_files, *outputs):
        files.append(path.relative_to(REPO).as_posix())
    return files


def _imported_by_a_run() -> list[str]:
    """The project's files a generator run imports (the table modules, the row model, the
    class module, the format module and their packages), relative to the root."""
    with project_imported_from(REPO):
        config = load_config(REPO)
        drift = compare(config, generate(config).files)
        imported = [
            Path(module.__file__).resolve()
            for name, module in sys.modules.items()
            if name.partition(".")[0] == "shardplan" and getattr(module, "__file__", None)
        ]
    assert not drift, drift.report(config)
    return sorted(p.relative_to(REPO).as_posix() for p in imported if p.is_relative_to(REPO))


def test_the_drift_hook_watches_every_file_specgen_tool_config_names() -> None:
    pattern = _drift_hook_pattern()
    files = _configured_inputs()
    assert "shardplan/table/plan_fields.py" in files and "shardplan/convert/kinds.py" in files
    assert [f for f in files if not pattern.match(f)] == []


def test_the_drift_hook_watches_every_project_module_a_generator_run_imports() -> None:
    pattern = _drift_hook_pattern()
    imported = _imported_by_a_run()
    assert "shardplan/table/spec_fields.py" in imported and "shardplan/table/rows.py" in imported
    assert [f for f in imported if not pattern.match(f)] == []


def test_the_drift_hook_ignores_files_the_generator_never_reads() -> None:
    pattern = _drift_hook_pattern()
    assert not pattern.match("shardplan/artifact/meta.py")
    assert not pattern.match("tests/generator/test_precommit_hook.py")
    assert not pattern.match("README.md")
