"""What the generator knows of the kinds: read from the kinds module's source, never
imported (it imports torch).

``shardplan/convert/kinds.py`` states each kind's meaning once: its function(s), and its line
in ``WRITTEN_WHEN`` (freeze: when the key is written), ``ABSENT`` (rebuild: what a
missing key gives) and ``READS_BACK`` (which rebuild kinds read back what a freeze kind
writes). The templates' macros only shape the generated code; a kind missing its
function, its declaration or its macro is refused, naming what is missing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.errors import GeneratorError

STEPS = ("freeze", "rebuild")
DECLARATIONS = {"freeze": "WRITTEN_WHEN", "rebuild": "ABSENT"}
SHORTCUTS = {"freeze": "FREEZE_SHORTCUTS", "rebuild": "REBUILD_SHORTCUTS"}
# The exact types an ("is", ...) shortcut may name: JSON's scalars, as Python builtins.
SHORTCUT_TYPES = frozenset({"bool", "int", "float", "str"})
WRITTEN_WHEN_VALUES = ("not None", "truthy", "always")


@dataclass(frozen=True)
class KindFacts:
    """The kinds module's declarations and the names it defines."""

    module: str  # e.g. "shardplan.convert.kinds": what generated code imports from
    source_file: str  # relative to the project root, for messages
    written_when: dict[str, str]
    absent: dict[str, str]
    reads_back: dict[str, tuple[str, ...]]
    freeze_shortcuts: dict[str, tuple[str, ...]]
    rebuild_shortcuts: dict[str, tuple[str, ...]]
    defined: frozenset[str]  # every top-level name the module defines or imports
    schema: dict[str, dict[str, Any]]  # rebuild kind -> {"shows": ..., "schema": ...}
    meta_field: dict[str, str]  # rebuild kind -> the annotation of a CodegenMeta field

    def kinds(self, step: str) -> tuple[str, ...]:
        """The declared kinds of ``step`` ("freeze" or "rebuild"), sorted."""
        return tuple(sorted(self.written_when if step == "freeze" else self.absent))

    def freeze_shortcut(self, freeze: str, rebuild: str) -> tuple[str, ...]:
        """The shortcut generated freeze takes on a row of these kinds, or ``()``.

        Where the pair is not in READS_BACK, freeze reads its value back (``admit``), which
        a shortcut would skip: only the types the rebuild kind gives back as they are stay.
        """
        shortcut = self.freeze_shortcuts.get(freeze, ())
        if not shortcut or rebuild in self.reads_back.get(freeze, ()):
            return shortcut
        back = self.rebuild_shortcuts.get(rebuild, ())
        if shortcut[0] != "is" or back[:1] != ("is",):
            return ()
        types = tuple(name for name in shortcut[1:] if name in back[1:])
        return ("is", *types) if types else ()

    def template_globals(self) -> dict[str, Any]:
        """What the templates read: the declarations, and the module to import from."""
        return {
            "written_when": self.written_when,
            "absent": self.absent,
            "reads_back": self.reads_back,
            "freeze_shortcut": self.freeze_shortcut,
            "rebuild_shortcuts": self.rebuild_shortcuts,
            "kinds_module": self.module,
            "kinds_file": self.source_file,
            "kinds_defined": self.defined,
            "freeze_kinds": self.kinds("freeze"),
            "rebuild_kinds": self.kinds("rebuild"),
            "meta_field": self.meta_field,
        }


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
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name and value is not None:
            try:
                return ast.literal_eval(value)
            except ValueError:
                raise GeneratorError(
                    f"{where}: {name} must be a plain literal (the generator reads it without "
                    "importing the module)"
                ) from None
    raise GeneratorError(f"{where} has no {name}: it declares each kind's meaning; restore it")


def _shortcut_problems(
    where: str, step: str, shortcuts: Any, declared: dict[str, Any], defined: set[str]
) -> list[str]:
    name = SHORTCUTS[step]
    if not isinstance(shortcuts, dict):
        return [f"{where}: {name} must be a dict of kind -> shortcut"]
    problems = []
    for kind, how in shortcuts.items():
        at = f"{where}: {name}[{kind!r}]"
        if kind not in declared:
            problems.append(f"{at}: no such {step} kind in {DECLARATIONS[step]}")
        elif not isinstance(how, tuple) or not how:
            problems.append(f'{at} must be ("call", function) or ("is", type, ...)')
        elif how[0] == "call" and len(how) == 2 and how[1] in defined:
            continue
        elif how[0] == "is" and len(how) > 1 and set(how[1:]) <= SHORTCUT_TYPES:
            continue
        elif how[0] == "call":
            problems.append(f"{at}: ('call', name) needs a function this module defines")
        else:
            problems.append(f"{at}: ('is', ...) takes type names among {sorted(SHORTCUT_TYPES)}")
    return problems


def read_kinds(root: Path, module: str) -> KindFacts:
    """Parse the kinds module of ``root`` and check its declarations against its functions."""
    path = root / (module.replace(".", "/") + ".py")
    where = path.relative_to(root).as_posix()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
    except OSError as exc:
        raise GeneratorError(f"cannot read the kinds module {where}: {exc.strerror}") from None
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot parse the kinds module {where}: {exc}") from None
    written_when = _literal(tree, "WRITTEN_WHEN", where)
    absent = _literal(tree, "ABSENT", where)
    reads_back = _literal(tree, "READS_BACK", where)
    shortcuts = {step: _literal(tree, SHORTCUTS[step], where) for step in STEPS}
    schema = _literal(tree, "SCHEMA", where)
    meta_field = _literal(tree, "META_FIELD", where)
    defined = _defined_names(tree)
    # Kind functions are the ones this module defines (an imported helper is not a kind).
    own = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    problems = []
    for step, declared in (("freeze", written_when), ("rebuild", absent)):
        functions = {n.removeprefix(f"{step}_") for n in own if n.startswith(f"{step}_")}
        for kind in sorted(set(declared) - functions):
            problems.append(
                f"{where}: {step} kind {kind!r} is declared in {DECLARATIONS[step]} but has no "
                f"function {step}_{kind}: write it, or remove the declaration"
            )
        for kind in sorted(functions - set(declared)):
            problems.append(
                f"{where}: function {step}_{kind} has no line in {DECLARATIONS[step]}: declare "
                f"the kind's meaning there, or rename the function"
            )
    for kind, value in written_when.items():
        if value not in WRITTEN_WHEN_VALUES:
            problems.append(
                f"{where}: WRITTEN_WHEN[{kind!r}] must be one of "
                + ", ".join(map(repr, WRITTEN_WHEN_VALUES))
            )
    for kind, readers in reads_back.items():
        if kind not in written_when or any(r not in absent for r in readers):
            problems.append(
                f"{where}: READS_BACK[{kind!r}] must map a freeze kind to rebuild kinds "
                "declared in WRITTEN_WHEN and ABSENT"
            )
    for step, declared in (("freeze", written_when), ("rebuild", absent)):
        problems += _shortcut_problems(where, step, shortcuts[step], declared, defined)
    for kind in sorted(set(absent) - set(schema)):
        problems.append(
            f'{where}: rebuild kind {kind!r} has no SCHEMA line: add {{"shows": ..., "schema": '
            "...}} beside its ABSENT line (the JSON Schema of the values it accepts)"
        )
    for kind, fragment in schema.items():
        if kind not in absent:
            problems.append(f"{where}: SCHEMA[{kind!r}] names no rebuild kind in ABSENT")
        elif not isinstance(fragment, dict) or set(fragment) != {"shows", "schema"}:
            problems.append(
                f'{where}: SCHEMA[{kind!r}] must be {{"shows": str, "schema": {{...}}}}'
            )
    for kind in sorted(set(absent) - set(meta_field)):
        problems.append(
            f"{where}: rebuild kind {kind!r} has no META_FIELD line: add its annotation "
            "beside its ABSENT line (how CodegenMeta holds a top-level key of the kind)"
        )
    for kind in meta_field:
        if kind not in absent:
            problems.append(f"{where}: META_FIELD[{kind!r}] names no rebuild kind in ABSENT")
    if problems:
        raise GeneratorError("\n".join(problems))
    return KindFacts(
        module=module,
        source_file=where,
        written_when=written_when,
        absent=absent,
        reads_back={kind: tuple(readers) for kind, readers in reads_back.items()},
        freeze_shortcuts={kind: tuple(how) for kind, how in shortcuts["freeze"].items()},
        rebuild_shortcuts={kind: tuple(how) for kind, how in shortcuts["rebuild"].items()},
        defined=frozenset(defined),
        schema=schema,
        meta_field=dict(meta_field),
    )


def check_macros(facts: KindFacts, macros: dict[str, tuple[str, ...]], templates: str) -> None:
    """A kind needs no macro (the generic one lays its code out); a macro of kinds.j2 named
    for a kind overrides it, and must name a declared kind."""
    problems = []
    for step in STEPS:
        for kind in sorted(set(macros[step]) - set(facts.kinds(step))):
            problems.append(
                f"{templates}/kinds.j2: macro {step}_{kind} has no kind in {facts.source_file}: "
                f"write its function {step}_{kind} and its line in {DECLARATIONS[step]}, or "
                "remove the macro"
            )
    if problems:
        raise GeneratorError("\n".join(problems))
