"""The kinds as the generator reads them: the project's typed records, kind names and
resolver (the ``kinds`` module of [tool.specgen], imported: it is standard library only),
checked against the functions its ``FUNCTIONS`` module defines (read from that module's
source: importing it imports torch)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import GeneratorError

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing, KindName, Record

# The prefixes of a record's functions: freeze, rebuild, and a derived key's strict check.
STEPS = ("freeze", "rebuild")
PREFIXES = (*STEPS, "check")
DECLARED = ("FUNCTIONS", "KINDS", "KIND_NAMES", "KindError", "resolve", "literal_problem")


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's records, names and resolver, and the names its functions define."""

    module: str  # the functions module, e.g. "shardplan.convert.kinds": generated code's import
    source_file: Path
    records: dict[str, Record]
    names: dict[str, KindName]
    defined: frozenset[str]  # every top-level name the functions module defines or imports
    resolve: Callable[[Any, Any], Crossing]
    error: type[Exception]  # what resolve raises, its message naming the fix


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _record_problems(
    at: str, name: str, record: Record, functions: dict[str, set[str]], defined: set[str]
) -> list[str]:
    problems = []
    if not any(name in functions[prefix] for prefix in PREFIXES):
        problems.append(f"{at} has no function: write freeze_{name} and/or rebuild_{name}")
    if record.reads_back and name not in functions["freeze"]:
        problems.append(f"{at}: reads_back is said of a freeze; there is no freeze_{name}")
    for reader in record.reads_back:
        if reader not in functions["rebuild"] | functions["check"]:
            problems.append(f"{at}: reads_back names {reader!r}, which has no rebuild function")
    for step, shortcut in (
        ("freeze", record.freeze_shortcut),
        ("rebuild", record.rebuild_shortcut),
    ):
        if shortcut is not None and name not in functions[step]:
            problems.append(f"{at}: {step}_shortcut, but there is no {step}_{name}")
    calls = [s.call for s in (record.freeze_shortcut, record.rebuild_shortcut) if s and s.call]
    if record.write_shortcut is not None:
        if name not in functions["freeze"]:
            problems.append(f"{at}: write_shortcut, but there is no freeze_{name}")
        calls += [record.write_shortcut.live, record.write_shortcut.check]
    problems += [
        f"{at}: shortcut {c!r} is no function the module defines" for c in calls if c not in defined
    ]
    return problems


def read_kinds(root: Path, module: ModuleType) -> KindFacts:
    """Check the kinds module's records and names against its functions' source."""
    missing = [name for name in DECLARED if not hasattr(module, name)]
    if missing:
        raise GeneratorError(f"the kinds module {module.__name__} has no {missing[0]}: restore it")
    where = module.__name__.replace(".", "/") + ".py"
    functions_file = root / (str(module.FUNCTIONS).replace(".", "/") + ".py")
    shown = functions_file.relative_to(root).as_posix()
    try:
        tree = ast.parse(functions_file.read_text(encoding="utf-8"), filename=shown)
    except OSError as exc:
        raise GeneratorError(f"cannot read the kinds' functions {shown}: {exc.strerror}") from None
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot parse the kinds' functions {shown}: {exc}") from None
    defined = _defined_names(tree)
    # A kind's functions are the ones that module defines (an imported helper is not a kind).
    own = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    functions = {
        p: {n.removeprefix(f"{p}_") for n in own if n.startswith(f"{p}_")} for p in PREFIXES
    }
    records: dict[str, Record] = module.KINDS
    names: dict[str, KindName] = module.KIND_NAMES
    problems = []
    for name, record in records.items():
        problems += _record_problems(f"{where}: KINDS[{name!r}]", name, record, functions, defined)
    for prefix in PREFIXES:
        problems += [
            f"{shown}: function {prefix}_{name} has no record in KINDS ({where}): state the kind's "
            "meaning there, or rename the function"
            for name in sorted(functions[prefix] - set(records))
        ]
    for name, kind in names.items():
        at = f"{where}: KIND_NAMES[{name!r}]"
        if kind.freeze is None and kind.rebuild is None:
            problems.append(
                f"{at} serves no step: give it freeze=Writes(...) and/or rebuild=Reads(...)"
            )
        if kind.freeze is not None and kind.freeze.record not in functions["freeze"] & set(records):
            problems.append(
                f"{at}: freeze record {kind.freeze.record!r} has no freeze_{kind.freeze.record} in KINDS"
            )
        readable = (functions["rebuild"] | functions["check"]) & set(records)
        if kind.rebuild is not None and kind.rebuild.record not in readable:
            problems.append(
                f"{at}: rebuild record {kind.rebuild.record!r} has no rebuild_{kind.rebuild.record} in KINDS"
            )
        if kind.rebuild is not None and kind.rebuild.absent:
            if literal := module.literal_problem(kind.rebuild.absent):
                problems.append(f"{at}: the absent value {literal}")
    named = {step.record for kind in names.values() for step in (kind.freeze, kind.rebuild) if step}
    problems += [
        f"{where}: KINDS[{record!r}] has no kind name: name it in KIND_NAMES, the words rows use"
        for record in sorted(set(records) - named)
    ]
    if problems:
        raise GeneratorError("\n".join(problems))
    return KindFacts(
        module=str(module.FUNCTIONS),
        source_file=functions_file,
        records=records,
        names=names,
        defined=frozenset(defined),
        resolve=module.resolve,
        error=module.KindError,
    )
