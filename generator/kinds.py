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
PREFIXES = ("freeze", "rebuild", "check")
DECLARED: tuple[str, ...] = ("FUNCTIONS", "KINDS", "KIND_NAMES", "KindError", "resolve")
DECLARED += ("problems", "law_problem", "field_types")


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's records, names and resolver, and the names its functions define."""

    module: str  # the functions module, e.g. "shardplan.convert.kinds": generated code's import
    source_file: Path
    records: dict[str, Record]
    names: dict[str, KindName]
    defined: frozenset[str]  # every top-level name the functions module defines or imports
    resolve: Callable[[Any, Any, Any], Crossing]
    error: type[Exception]  # what resolve raises, its message naming the fix
    law_problem: Callable[[Any, Any, Any], str]  # a broken law (defaults, type), and the fix
    field_types: Callable[[type], dict[str, Any]]  # a dataclass's annotations, resolved


def bound_names(tree: ast.Module, shown: str) -> dict[str, str]:
    """The names a module binds at its top level (under ``if TYPE_CHECKING:`` too), each
    with how, for messages: what it imports, defines or assigns."""
    bound: dict[str, str] = {}
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            statements += [*node.body, *node.orelse]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = f"{shown} imports it"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] = f"{shown} defines it"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {t.id: f"{shown} assigns it" for t in targets if isinstance(t, ast.Name)}
    return bound


def read_kinds(root: Path, module: ModuleType) -> KindFacts:
    """Check the kinds module's records and names against its functions' source."""
    if missing := [name for name in DECLARED if not hasattr(module, name)]:
        raise GeneratorError(f"the kinds module {module.__name__} has no {missing[0]}: restore it")
    functions_file = root / (str(module.FUNCTIONS).replace(".", "/") + ".py")
    shown = functions_file.relative_to(root).as_posix()
    try:
        tree = ast.parse(functions_file.read_text(encoding="utf-8"), filename=shown)
    except OSError as exc:
        raise GeneratorError(f"cannot read the kinds' functions {shown}: {exc.strerror}") from None
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot parse the kinds' functions {shown}: {exc}") from None
    defined = set(bound_names(tree, shown))
    # A kind's functions are the ones that module defines (an imported helper is not a kind).
    own = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    functions = {
        p: {n.removeprefix(f"{p}_") for n in own if n.startswith(f"{p}_")} for p in PREFIXES
    }
    where = module.__name__.replace(".", "/") + ".py"
    problems = [f"{where}: {p}" for p in module.problems(functions, defined)]
    problems += [
        f"{shown}: function {prefix}_{name} has no record in KINDS ({where}): state the kind's "
        "meaning there, or rename the function"
        for prefix in PREFIXES
        for name in sorted(functions[prefix] - set(module.KINDS))
    ]
    if problems:
        raise GeneratorError("\n".join(problems))
    return KindFacts(
        module=str(module.FUNCTIONS),
        source_file=functions_file,
        records=module.KINDS,
        names=module.KIND_NAMES,
        defined=frozenset(defined),
        resolve=module.resolve,
        error=module.KindError,
        law_problem=module.law_problem,
        field_types=module.field_types,
    )
