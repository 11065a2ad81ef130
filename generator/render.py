"""Render each declared output from its template with the validated tables.

A kind is declared in the kinds module (``generator.kinds`` reads it); ``kinds.j2`` lays
out the generic freeze and rebuild blocks, and a macro named for a kind overrides them.
Every literal reaches the output through ``pyrepr``, never raw. The names the generated
code binds are read off the rendered code itself (``check_name_clashes``), so no
hand-kept list can fall behind the templates.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jinja2

from generator.artifact_schema import schema_globals
from generator.config import Config
from generator.errors import GeneratorError
from generator.evolution import lock_of
from generator.kinds import STEPS, KindFacts
from generator.table import DERIVED, Format, Table, Tables

KINDS_TEMPLATE = "kinds.j2"
TEMPLATE_SUFFIX = ".j2"
# Templates that render an output file: each must be a declared output.
OUTPUT_TEMPLATE_SUFFIXES = (".py.j2", ".json.j2", ".md.j2")


def pyrepr(value: Any) -> str:
    """A Python literal for a str, int, bool, None or a tuple of them."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # StrictUndefined: raises, naming the variable
    if isinstance(value, tuple):
        for item in value:
            pyrepr(item)
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise jinja2.TemplateRuntimeError(
            f"pyrepr: {value!r} ({type(value).__name__}) has no safe literal form"
        )
    return repr(value)


def _check_template_files(config: Config) -> None:
    """Refuse a missing templates folder or a template that is not UTF-8, naming the place.

    Jinja would report the first as "kinds.j2 not found" and the second as a bare
    UnicodeDecodeError from deep inside its loader.
    """
    folder = config.templates_name
    if not config.templates.is_dir():
        raise GeneratorError(
            f"the templates folder {folder}/ does not exist: restore it (git checkout -- "
            f"{folder}), or fix `templates` in [tool.specgen] of pyproject.toml"
        )
    for path in sorted(config.templates.rglob(f"*{TEMPLATE_SUFFIX}")):
        name = path.relative_to(config.root).as_posix()
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise GeneratorError(f"cannot read {name}: {exc.strerror}") from None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise GeneratorError(
                f"{name}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8; "
                "templates are read as UTF-8: save the file as UTF-8"
            ) from None


def make_environment(config: Config, kinds: KindFacts, form: Format) -> jinja2.Environment:
    """The one Jinja2 environment: strict about undefined names, exact about whitespace.
    ``kinds``: the kinds' declarations every template reads; ``form``: the format module,
    whose names (groups, MATCH_KEY, ...) the templates read as ``fmt``."""
    _check_template_files(config)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(config.templates), encoding="utf-8"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = pyrepr
    # How a key extends an error path (``.key``, or ``["key"]``): the runtime's own
    # field_path, so generated paths and the reference's are one rule.
    env.filters["path_suffix"] = lambda key: form.module.field_path("", key)
    env.filters["json"] = json.dumps  # JSON outputs: every value goes through it
    env.filters["merged"] = lambda first, second: {**first, **second}
    env.globals["templates_folder"] = config.templates_name
    env.globals["fmt"] = form.module
    # Before any template is loaded: the kinds' macros read these as globals.
    env.globals.update(kinds.template_globals())
    env.globals.update(schema_globals(kinds, form))
    return env


def _template_error(env: jinja2.Environment, exc: Exception) -> GeneratorError:
    """A one-place message for a Jinja error: ``templates/<file>:<line>: <what>``."""
    folder = env.globals["templates_folder"]
    if isinstance(exc, jinja2.TemplateNotFound):
        return GeneratorError(f"{folder}/: template {exc.name!r} not found (imported by another)")
    # Jinja rewrites the tracebacks of render() so template frames carry the template's
    # file and line; a template's module (``.module``, kinds.j2's macros) is not rewritten:
    # its frames run the compiled code, whose line the template maps back.
    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        filename = frame.f_code.co_filename
        if filename.endswith(TEMPLATE_SUFFIX):
            compiled = frame.f_globals.get("__jinja_template__")
            if isinstance(compiled, jinja2.Template):
                line = compiled.get_corresponding_lineno(line)
            return GeneratorError(f"{folder}/{Path(filename).name}:{line}: {exc}")
    name = getattr(exc, "name", None) or getattr(exc, "filename", None)
    lineno = getattr(exc, "lineno", None)
    where = f"{folder}/{name}" + (f":{lineno}" if lineno else "") if name else f"{folder}/"
    return GeneratorError(f"{where}: {exc}")


@contextmanager
def _one_message(env: jinja2.Environment) -> Iterator[None]:
    """Any error a template raises while it renders (a Jinja error, or an expression that
    raised, ``{{ 1 // 0 }}``) as one message naming the template and line, never a
    traceback; the generator's own refusals pass through as they are."""
    try:
        yield
    except GeneratorError:
        raise
    except Exception as exc:
        raise _template_error(env, exc) from None


def known_kinds(env: jinja2.Environment) -> dict[str, tuple[str, ...]]:
    """``{"freeze": (...), "rebuild": (...)}``: the kinds that have a macro in kinds.j2
    (``pipeline`` checks them against the kinds module's functions and declarations)."""
    folder = env.globals["templates_folder"]
    if KINDS_TEMPLATE not in env.list_templates():
        raise GeneratorError(
            f"{folder}/{KINDS_TEMPLATE} is missing: it holds one macro per kind; restore it"
        )
    with _one_message(env):  # kinds.j2's top level renders here, once
        module = env.get_template(KINDS_TEMPLATE).module
    macros = sorted(name for name in dir(module) if not name.startswith("_"))
    overrides = {
        step: tuple(name.removeprefix(f"{step}_") for name in macros if name.startswith(f"{step}_"))
        for step in STEPS
    }

    def macro_for(step: str, row: Any) -> str:
        # The generator's decision per row: a kind's own macro where kinds.j2 has one (its
        # code is genuinely special), else the generic one.
        kind = getattr(row, step)
        return f"{step}_{kind}" if kind in overrides[step] else step

    env.globals["macro_for"] = macro_for
    return overrides


def output_templates(env: jinja2.Environment, config: Config) -> dict[str, str]:
    """Map each declared output to its template, refusing a missing or an undeclared one."""
    folder = env.globals["templates_folder"]
    available = set(env.list_templates())
    for name in config.outputs:
        if f"{name}{TEMPLATE_SUFFIX}" not in available:
            raise GeneratorError(
                f"{config.output_name}/{name} is a declared output, but its template "
                f"{folder}/{name}{TEMPLATE_SUFFIX} is missing: restore the template, or remove "
                f'"{name}" from outputs in [tool.specgen] of pyproject.toml'
            )
    for template in sorted(available):
        output = template.removesuffix(TEMPLATE_SUFFIX)
        if template.endswith(OUTPUT_TEMPLATE_SUFFIXES) and output not in config.outputs:
            raise GeneratorError(
                f'{folder}/{template} renders no declared output: add "{output}" to outputs '
                "in [tool.specgen] of pyproject.toml, or remove the template"
            )
    return {name: f"{name}{TEMPLATE_SUFFIX}" for name in config.outputs}


# What the generated function around a macro's block binds: the objects read (spec,
# plan, meta), the dict written to or read from and the error path's base (passed to the
# macro as "target" and "path"), the entries a derived key is computed from, the mode.
_BLOCK_CONTEXT = frozenset({"spec", "plan", "meta", "path", "target", "param_plan", "strict"})
# Names a block may use that shardplan.artifact.shapes defines, not the kinds module: UNSET,
# a plan-level key the document does not hold. Imported where a block uses it.
SHAPES_NAMES = frozenset({"UNSET"})


def _row_block(env: jinja2.Environment, table: Table, row: Any, step: str) -> str:
    """One row's block of ``step``, as the templates lay it out."""
    module = env.get_template(KINDS_TEMPLATE).module
    if table.roles[row.group] == DERIVED:
        return str(getattr(module, f"derived_{step}")(row))
    if row.group in table.top_level_groups:  # the plan level: read from meta, a local out
        if step == "rebuild":
            return str(module.plan_rebuild(row))  # type: ignore[attr-defined]
        macro = getattr(module, env.globals["macro_for"](step, row))  # type: ignore[operator]
        if row.within:
            return str(macro(row, row.within, "", "plan", row.leaf, row.name))
        return str(macro(row, "", "", "plan", None, row.name, row.leaf))
    macro = getattr(module, env.globals["macro_for"](step, row))  # type: ignore[operator]
    return str(macro(row, "target", "path"))


def _called_functions(env: jinja2.Environment, tables: Tables, step: str) -> list[str]:
    """The functions the rows' ``step`` blocks call, read off the rendered blocks, so the
    generated imports are exactly what the code uses (``admit`` only where a row's value
    is read back at freeze, say), whatever the macros emit. Each must be defined by the
    kinds module, read as source: otherwise the generated import would fail."""
    defined: frozenset[str] = env.globals["kinds_defined"]  # type: ignore[assignment]
    used: set[str] = set()
    problems = []
    for table in tables:
        for row in table.keyed:
            with _one_message(env):  # a broken macro: one message, never a traceback
                block = _row_block(env, table, row, step)
            try:
                tree = ast.parse(block)
            except SyntaxError as exc:
                raise GeneratorError(
                    f"{_row_label(table, row)}: its {step} block (in "
                    f"{env.globals['templates_folder']}/{KINDS_TEMPLATE}) is not valid Python: "
                    f"{exc.msg}\n  {(exc.text or '').strip()}"
                ) from None
            names = [node for node in ast.walk(tree) if isinstance(node, ast.Name)]
            bound = {node.id for node in names if isinstance(node.ctx, ast.Store)}
            calls = {node.id for node in names if isinstance(node.ctx, ast.Load)} - bound
            calls -= _BLOCK_CONTEXT | set(table.containers()) | set(dir(builtins))
            for name in sorted(calls - defined - SHAPES_NAMES):
                problems.append(
                    f"{_row_label(table, row)}: its {step} block (in "
                    f"{env.globals['templates_folder']}/{KINDS_TEMPLATE}) uses {name!r}, which "
                    f"{env.globals['kinds_file']} does not define: define it there, or fix "
                    "the macro"
                )
            used |= calls
    if problems:
        raise GeneratorError("\n".join(problems))
    return sorted(used)


def _row_label(table: Table, row: Any) -> str:
    label = "table row" if table.name == "spec" else f"table {table.name!r} row"
    return f"{label} {table.number(row)} ({row.name})"


def check_kind_calls(env: jinja2.Environment, tables: Tables) -> None:
    """Refuse a row whose generated block would use a name the kinds module does not
    define (a macro added without its function, say), naming the row."""
    for step in STEPS:
        _called_functions(env, tables, step)


def _context(env: jinja2.Environment, tables: Tables) -> dict[str, Any]:
    return {
        "tables": tables,
        "table_sha256": tables.digest,
        "table_digests": {table.module: table.digest for table in tables},
        "table_file": tables.source_files,
        **{
            f"{step}_{what}": [
                name for name in names if (name in SHAPES_NAMES) == (what == "shapes")
            ]
            for step in STEPS
            for names in [_called_functions(env, tables, step)]
            for what in ("functions", "shapes")
        },
    }


def _meaning(env: jinja2.Environment) -> dict[str, dict[str, str]]:
    """The kinds' meaning the lock records: each freeze kind's write condition and each
    rebuild kind's absent value, as the kinds module declares them (KindFacts)."""
    written_when: dict[str, str] = env.globals.get("written_when", {})  # type: ignore[assignment]
    absent: dict[str, str] = env.globals.get("absent", {})  # type: ignore[assignment]
    return {"written_when": dict(written_when), "absent": dict(absent)}


def render_all(
    env: jinja2.Environment,
    tables: Tables,
    config: Config,
    breaks: Sequence[dict[str, Any]] = (),
) -> dict[str, str]:
    """Render each declared output (unformatted), keyed by file name. ``breaks``: the
    breaking table edits allowed so far, which the table lock keeps."""
    context = {**_context(env, tables), "lock": lock_of(tables, list(breaks), _meaning(env))}
    sources: dict[str, str] = {}
    for out_name, template in output_templates(env, config).items():
        module_file = f"{config.output_name}/{out_name}"
        with _one_message(env):  # an expression that raised ({{ 1 // 0 }}): one message
            source = env.get_template(template).render(context, module_file=module_file)
        _check_rendered(source, out_name, module_file, f"{config.templates_name}/{template}")
        sources[out_name] = source
    return sources


def _check_rendered(source: str, out_name: str, module_file: str, template: str) -> None:
    """Refuse a template that rendered invalid Python or JSON, naming it and the line."""
    if out_name.endswith(".py"):
        try:
            ast.parse(source, filename=module_file)
        except SyntaxError as exc:
            raise GeneratorError(
                f"{template} rendered invalid Python at line {exc.lineno}: {exc.msg}\n"
                f"  {(exc.text or '').strip()}"
            ) from None
    elif out_name.endswith(".json"):
        try:
            json.loads(source)
        except ValueError as exc:
            raise GeneratorError(f"{template} rendered invalid JSON: {exc}") from None


# ------------------------------------------------------------------ name clashes


def _probe_name(table: Table, number: int) -> str:
    # What a row's name becomes in the probe rendering; no real name looks like it.
    return f"_specgen_probe_{table.name}_row_{number}_"


@dataclasses.dataclass(frozen=True)
class Use:
    """How a generated module uses a name, said the way a reviewer would."""

    name: str
    how: str


def _uses(tree: ast.Module) -> Iterator[Use]:
    """Every name a module binds or reads, with how, in source order; attributes excluded."""

    def walk(node: ast.AST, scope: str | None) -> Iterator[Use]:
        local = f"a local of {scope}()" if scope else "a module-level name"
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield Use(alias.asname or alias.name, f"imports it from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Use(alias.asname or alias.name.split(".")[0], "imports it")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield Use(node.name, "defines it")
            for child in ast.iter_child_nodes(node):
                yield from walk(child, node.name)
            return
        elif isinstance(node, ast.arg):
            yield Use(node.arg, f"takes it as a parameter of {scope}()")
        elif isinstance(node, ast.Name):
            bound = isinstance(node.ctx, (ast.Store, ast.Del))
            yield Use(node.id, f"binds it as {local}" if bound else "reads it")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                yield Use(name, f"declares it in {scope}()")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield Use(node.name, f"binds it as {local}")
        for child in ast.iter_child_nodes(node):
            yield from walk(child, scope)

    yield from walk(tree, None)


def check_name_clashes(env: jinja2.Environment, tables: Tables, config: Config) -> None:
    """Refuse a row whose name the generated code would use for something else.

    The templates are rendered once more with every row's name replaced by a probe name
    no template can contain. In that rendering, a module that uses a row's probe name as a
    Python name (a local the rebuild binds, say) must not use the row's real name for
    anything else: that name is reserved there. So the reserved names are read off the
    rendered code itself, whatever the templates bind today.
    """
    probe = Tables(
        tuple(
            dataclasses.replace(
                table,
                rows=tuple(
                    dataclasses.replace(row, name=_probe_name(table, number))
                    for number, row in enumerate(table.rows, start=1)
                ),
            )
            for table in tables
        )
    )
    problems: list[str] = []
    for out_name, source in render_all(env, probe, config).items():
        if not out_name.endswith(".py"):
            continue  # the schema, the reference and the lock bind no Python names
        uses = list(_uses(ast.parse(source)))
        names = {use.name for use in uses}
        first_use: dict[str, Use] = {}
        for use in uses:
            first_use.setdefault(use.name, use)
        for table in tables:
            for number, row in enumerate(table.rows, start=1):
                if _probe_name(table, number) not in names or row.name not in first_use:
                    continue
                use = first_use[row.name]
                problems.append(
                    f"{_row_label(table, row)}: name {row.name!r} clashes with the "
                    f"generated code: {config.output_name}/{out_name} names a Python variable "
                    f"after the field, and already {use.how}.\n"
                    "  Rename the field (and its row)."
                )
    if problems:
        raise GeneratorError("\n".join(problems))
