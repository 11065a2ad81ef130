"""The kinds module's ``KINDS`` records, its ``KIND_NAMES`` (the words rows use: a record
and a presence each step) and its functions, read from its source (importing it imports
torch) and checked against each other."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import GeneratorError

STEPS = ("freeze", "rebuild")
# A record's fields: required, and optional (its shortcuts, one a step, and the writer's).
RECORD_FIELDS = frozenset({"shows", "schema", "held_as"})
OPTIONAL_FIELDS = frozenset({"reads_back", "freeze_shortcut", "rebuild_shortcut", "write_shortcut"})
# The exact types an ("is", ...) shortcut may name: JSON's scalars, as Python builtins.
SHORTCUT_TYPES = frozenset({"bool", "int", "float", "str"})


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's records and names, and the names it defines."""

    module: str  # e.g. "shardplan.convert.kinds": what generated code imports from
    records: dict[str, dict[str, Any]]
    names: dict[str, dict[str, tuple[str, str]]]  # kind name -> step -> (record, presence)
    defined: frozenset[str]  # every top-level name the module defines or imports

    def record(self, step: str, name: str) -> str:
        """The record kind name ``name`` stands for in ``step``."""
        return self.names[name][step][0]

    def function(self, step: str, name: str) -> str:
        """The function generated code calls for kind name ``name`` of ``step``."""
        return f"{step}_{self.record(step, name)}"

    def rebuild_record(self, name: str) -> dict[str, Any]:
        """The record of rebuild kind name ``name``."""
        return self.records[self.record("rebuild", name)]

    def reads_back(self, freeze: str, rebuild: str) -> bool:
        """Whether the rebuild kind reads back all the freeze kind writes (else ``admit``)."""
        readers = self.records[self.record("freeze", freeze)].get("reads_back", ())
        return self.record("rebuild", rebuild) in readers

    def shortcut(self, step: str, name: str) -> tuple[str, ...]:
        """The record's shortcut for ``step``, or ``()``."""
        record = self.records[self.record(step, name)]
        return tuple(record.get(f"{step}_shortcut", ()))

    def freeze_shortcut(self, freeze: str, rebuild: str) -> tuple[str, ...]:
        """The shortcut generated freeze takes on a row of these kinds, or ``()``; where freeze
        reads its value back (``admit``), only the types the rebuild kind gives back as is."""
        shortcut = self.shortcut("freeze", freeze)
        if not shortcut or self.reads_back(freeze, rebuild):
            return shortcut
        back = self.shortcut("rebuild", rebuild)
        if shortcut[0] != "is" or back[:1] != ("is",):
            return ()
        types = tuple(name for name in shortcut[1:] if name in back[1:])
        return ("is", *types) if types else ()

    def write_shortcut(self, freeze: str, rebuild: str) -> tuple[str, str]:
        """write_plan's functions on a row of these kinds: the live value to write as is and the
        plan-wide check of those values; two "" where there are none or freeze ``admit``s."""
        if not self.reads_back(freeze, rebuild):
            return ("", "")
        record = self.records[self.record("freeze", freeze)]
        _, give, check = record.get("write_shortcut", ("", "", ""))
        return (str(give), str(check))


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


def _literal(tree: ast.Module, name: str, where: str) -> Any:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        value = getattr(node, "value", None)
        if value is not None and any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(value)
            except ValueError:
                raise GeneratorError(
                    f"{where}: {name} must be a plain literal (the generator reads it without "
                    "importing the module)"
                ) from None
    raise GeneratorError(f"{where} has no {name}: it declares the kinds; restore it")


def _shortcut_problem(at: str, how: Any, defined: set[str]) -> str | None:
    if not isinstance(how, tuple) or not how:
        return f'{at} must be ("call", function) or ("is", type, ...)'
    if how[0] == "call" and len(how) == 2 and how[1] in defined:
        return None
    if how[0] == "is" and len(how) > 1 and set(how[1:]) <= SHORTCUT_TYPES:
        return None
    if how[0] == "call":
        return f"{at}: ('call', name) needs a function this module defines"
    return f"{at}: ('is', ...) takes type names among {sorted(SHORTCUT_TYPES)}"


def _record_problems(
    where: str, records: Any, functions: dict[str, set[str]], defined: set[str]
) -> list[str]:
    if not isinstance(records, dict):
        return [f"{where}: KINDS must be a dict of record name -> record"]
    problems = []
    for name, record in records.items():
        at = f"{where}: KINDS[{name!r}]"
        if not isinstance(record, dict):
            problems.append(f"{at} must be a dict")
            continue
        missing = sorted(RECORD_FIELDS - set(record))
        unknown = sorted(set(record) - RECORD_FIELDS - OPTIONAL_FIELDS)
        if missing:
            problems.append(f"{at} has no {', '.join(missing)}: state it in the record")
        if unknown:
            problems.append(
                f"{at}: unknown field {', '.join(unknown)}; a record has "
                + ", ".join(sorted(RECORD_FIELDS | OPTIONAL_FIELDS))
            )
        if not any(name in functions[step] for step in STEPS):
            problems.append(
                f"{at} has no function: write freeze_{name} and/or rebuild_{name} beside it"
            )
        readers = record.get("reads_back", ())
        if "reads_back" in record and name not in functions["freeze"]:
            problems.append(f"{at}: reads_back is said of a freeze; it has no freeze_{name}")
        if not isinstance(readers, tuple) or any(r not in functions["rebuild"] for r in readers):
            problems.append(f"{at}: reads_back must be a tuple of records with a rebuild function")
        for step in STEPS:
            if f"{step}_shortcut" not in record:
                continue
            if name not in functions[step]:
                problems.append(f"{at}: {step}_shortcut, but there is no {step}_{name}")
                continue
            problem = _shortcut_problem(
                f"{at}[{step}_shortcut]", record[f"{step}_shortcut"], defined
            )
            if problem:
                problems.append(problem)
        how = record.get("write_shortcut", ("call", "", ""))
        if "write_shortcut" in record and name not in functions["freeze"]:
            problems.append(f"{at}: write_shortcut, but there is no freeze_{name}")
        elif not (isinstance(how, tuple) and len(how) == 3 and how[0] == "call"):
            problems.append(f'{at}[write_shortcut] must be ("call", function, check)')
        elif "write_shortcut" in record:
            found = (
                _shortcut_problem(f"{at}[write_shortcut]", ("call", f), defined) for f in how[1:]
            )
            problems += [problem for problem in found if problem]
        if isinstance(record.get("schema"), dict) is False and "schema" in record:
            problems.append(f"{at}: schema must be a JSON Schema object")
    for step in STEPS:
        for function in sorted(functions[step] - set(records)):
            problems.append(
                f"{where}: function {step}_{function} has no record in KINDS: state the kind's "
                "meaning there, or rename the function"
            )
    return problems


def _literal_problem(text: str) -> str | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return f"{text!r} is not a Python literal"
    return None if repr(value) == text else f"{text!r} is not written as Python writes it"


def _name_problems(
    where: str, names: Any, functions: dict[str, set[str]], written_conditions: tuple[str, ...]
) -> list[str]:
    if not isinstance(names, dict):
        return [f"{where}: KIND_NAMES must be a dict of kind name -> {{step: (record, presence)}}"]
    problems = []
    for name, steps in names.items():
        at = f"{where}: KIND_NAMES[{name!r}]"
        if not (isinstance(steps, dict) and steps and set(steps) <= set(STEPS)):
            problems.append(
                f'{at} must be {{"freeze": (record, written), "rebuild": (record, absent)}}'
            )
            continue
        for step, entry in steps.items():
            if not (
                isinstance(entry, tuple)
                and len(entry) == 2
                and all(isinstance(e, str) for e in entry)
            ):
                problems.append(f"{at}[{step!r}] must be (record, presence), two strings")
                continue
            record, preset = entry
            if record not in functions[step]:
                problems.append(
                    f"{at}[{step!r}]: record {record!r} has no {step}_{record} in KINDS"
                )
            if step == "freeze" and preset not in written_conditions:
                problems.append(
                    f"{at}['freeze']: the write condition must be one of "
                    + ", ".join(map(repr, written_conditions))
                )
            literal = _literal_problem(preset) if step == "rebuild" and preset else None
            if literal:
                problems.append(f"{at}['rebuild']: the absent value {literal}")
    return problems


def read_kinds(root: Path, module: str, form: ModuleType) -> KindFacts:
    """Parse the kinds module of ``root`` and check its records, names and functions."""
    written_conditions = tuple(form.WRITTEN_CONDITIONS)
    path = root / (module.replace(".", "/") + ".py")
    where = path.relative_to(root).as_posix()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
    except OSError as exc:
        raise GeneratorError(f"cannot read the kinds module {where}: {exc.strerror}") from None
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot parse the kinds module {where}: {exc}") from None
    records = _literal(tree, "KINDS", where)
    names = _literal(tree, "KIND_NAMES", where)
    defined = _defined_names(tree)
    # Kind functions are the ones this module defines (an imported helper is not a kind).
    own = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    functions = {
        step: {n.removeprefix(f"{step}_") for n in own if n.startswith(f"{step}_")}
        for step in STEPS
    }
    problems = _record_problems(where, records, functions, defined)
    if not problems:
        kinds = {step: functions[step] & set(records) for step in STEPS}
        problems += _name_problems(where, names, kinds, written_conditions)
    if not problems:  # a record no name stands for: no row could use it
        named = {record for steps in names.values() for record, _ in steps.values()}
        problems += [
            f"{where}: KINDS[{record!r}] has no kind name: name it in KIND_NAMES, the words "
            "rows use"
            for record in sorted(set(records) - named)
        ]
    if problems:
        raise GeneratorError("\n".join(problems))
    return KindFacts(
        module=module,
        records=records,
        names=names,
        defined=frozenset(defined),
    )
