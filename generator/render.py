"""Render each declared output from its template with the validated table.

The set of known kinds is read off the macros of ``kinds.j2``: a kind exists when its
macro does. Every literal reaches the output through ``pyrepr``, never raw. The names the
generated code binds are read off the rendered code itself (``check_name_clashes``), so no
hand-kept list can fall behind the templates.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jinja2

from generator.artifact_schema import schema_context
from generator.config import Config
from generator.errors import GeneratorError
from generator.evolution import lock_of
from generator.kinds import KindFacts, read_kinds
from generator.table import EXEMPT, INJECTIONS, PARAM_PLAN, Row, Table
from shardplan.errors import field_path

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


def path_suffix(key: str) -> str:
    """How a key extends an error path (``.key``, or ``["key"]`` when it is no identifier):
    the runtime's own ``field_path``, so generated paths and the reference's are one rule."""
    return field_path("", key)


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


def make_environment(config: Config, kinds: KindFacts | None = None) -> jinja2.Environment:
    """The one Jinja2 environment: strict about undefined names, exact about whitespace.
    ``kinds``: the kinds' declarations every template reads (read from the kinds module
    when not given)."""
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
    env.filters["path_suffix"] = path_suffix
    env.filters["json"] = json.dumps  # JSON outputs: every value goes through it
    env.globals["templates_folder"] = config.templates_name
    # Before any template is loaded: the kinds' macros read these as globals.
    env.globals.update((kinds or read_kinds(config.root, config.kinds)).template_globals())
    return env


def _template_error(env: jinja2.Environment, exc: jinja2.TemplateError) -> GeneratorError:
    """A one-place message for a Jinja error: ``templates/<file>:<line>: <what>``."""
    folder = env.globals["templates_folder"]
    if isinstance(exc, jinja2.TemplateNotFound):
        return GeneratorError(f"{folder}/: template {exc.name!r} not found (imported by another)")
    # Jinja rewrites tracebacks so template frames carry the template's file and line.
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.endswith(TEMPLATE_SUFFIX):
            return GeneratorError(f"{folder}/{Path(frame.filename).name}:{frame.lineno}: {exc}")
    name = getattr(exc, "name", None) or getattr(exc, "filename", None)
    lineno = getattr(exc, "lineno", None)
    where = f"{folder}/{name}" + (f":{lineno}" if lineno else "") if name else f"{folder}/"
    return GeneratorError(f"{where}: {exc}")


def known_kinds(env: jinja2.Environment) -> dict[str, tuple[str, ...]]:
    """``{"freeze": (...), "rebuild": (...)}``: the kinds that have a macro in kinds.j2
    (``pipeline`` checks them against the kinds module's functions and declarations)."""
    folder = env.globals["templates_folder"]
    if KINDS_TEMPLATE not in env.list_templates():
        raise GeneratorError(
            f"{folder}/{KINDS_TEMPLATE} is missing: it holds one macro per kind; restore it"
        )
    try:
        module = env.get_template(KINDS_TEMPLATE).module
    except jinja2.TemplateError as exc:
        raise _template_error(env, exc) from None
    macros = sorted(name for name in dir(module) if not name.startswith("_"))
    return {
        step: tuple(name.removeprefix(f"{step}_") for name in macros if name.startswith(f"{step}_"))
        for step in ("freeze", "rebuild")
    }


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


# What the generated function around a macro's block binds: the spec (freeze), the
# dict written to or read from and the error path's base (passed to the macro as "target"
# and "path").
_BLOCK_CONTEXT = frozenset({"spec", "path", "target"})


def _called_functions(env: jinja2.Environment, rows: tuple[Row, ...], step: str) -> list[str]:
    """The functions the rows' ``step`` blocks call, read off the rendered blocks, so the
    generated imports are exactly what the code uses (``admit`` only where a row's value
    is read back at freeze, say), whatever the macros emit. Each must be defined by the
    kinds module, read as source: otherwise the generated import would fail."""
    module = env.get_template(KINDS_TEMPLATE).module
    defined: frozenset[str] = env.globals["kinds_defined"]  # type: ignore[assignment]
    used: set[str] = set()
    problems = []
    for row in rows:
        block = str(getattr(module, f"{step}_{getattr(row, step)}")(row, "target", "path"))
        names = [node for node in ast.walk(ast.parse(block)) if isinstance(node, ast.Name)]
        bound = {node.id for node in names if isinstance(node.ctx, ast.Store)}
        calls = {node.id for node in names if isinstance(node.ctx, ast.Load)} - bound
        calls -= _BLOCK_CONTEXT | set(dir(builtins))
        for name in sorted(calls - defined):
            problems.append(
                f"table row {row.number} ({row.name}): its {step} block (macro "
                f"{step}_{getattr(row, step)} in {env.globals['templates_folder']}/"
                f"{KINDS_TEMPLATE}) uses {name!r}, which {env.globals['kinds_file']} does not "
                f"define: define it there, or fix the macro"
            )
        used |= calls
    if problems:
        raise GeneratorError("\n".join(problems))
    return sorted(used)


def check_kind_calls(env: jinja2.Environment, table: Table) -> None:
    """Refuse a row whose generated block would use a name the kinds module does not
    define (a macro added without its function, say), naming the row."""
    crossing = tuple(row for row in table.rows if row.group != EXEMPT)
    try:
        for step in ("freeze", "rebuild"):
            _called_functions(env, crossing, step)
    except jinja2.TemplateError as exc:  # a broken macro: one message, never a traceback
        raise _template_error(env, exc) from None


def _accepted_keys(table: Table, group: str) -> tuple[str, ...]:
    rows = table.group(group)
    aliases = tuple(alias for row in rows for alias in row.aliases)
    return (*(row.key for row in rows), *aliases, *table.retired_keys(group))


def _context(env: jinja2.Environment, table: Table) -> dict[str, Any]:
    crossing = tuple(row for row in table.rows if row.group != EXEMPT)
    param_plan, injections = table.group(PARAM_PLAN), table.group(INJECTIONS)
    return {
        "table_sha256": table.digest,
        "table_file": table.source_file,
        "param_plan_fields": param_plan,
        "injection_fields": injections,
        "constructor_fields": tuple(row for row in crossing if not row.post_init),
        "post_init_fields": tuple(row for row in crossing if row.post_init),
        # The keys strict rebuild accepts: current keys, their aliases, retired keys.
        "param_plan_keys": _accepted_keys(table, PARAM_PLAN),
        "injection_keys": _accepted_keys(table, INJECTIONS),
        "freeze_functions": _called_functions(env, crossing, "freeze"),
        "rebuild_functions": _called_functions(env, crossing, "rebuild"),
    }


def _docs_context(env: jinja2.Environment, table: Table) -> dict[str, Any]:
    # The kinds' declarations (written_when, absent) are globals: see make_environment.
    crossing = tuple(row for row in table.rows if row.group != EXEMPT)
    return {
        **schema_context(env, table),
        "crossing_fields": crossing,
        "aliased_fields": tuple(row for row in crossing if row.aliases),
        "retired": table.retired,
    }


def render_all(
    env: jinja2.Environment,
    table: Table,
    config: Config,
    breaks: Sequence[dict[str, Any]] = (),
) -> dict[str, str]:
    """Render each declared output (unformatted), keyed by file name. ``breaks``: the
    breaking table edits allowed so far, which the table lock keeps."""
    try:
        context = {
            **_context(env, table),
            **_docs_context(env, table),
            "lock": lock_of(table, list(breaks)),
        }
    except jinja2.TemplateError as exc:
        raise _template_error(env, exc) from None
    except SyntaxError as exc:
        raise GeneratorError(
            f"{env.globals['templates_folder']}/{KINDS_TEMPLATE}: a macro rendered invalid "
            f"Python: {exc.msg}\n  {(exc.text or '').strip()}"
        ) from None
    sources: dict[str, str] = {}
    for out_name, template in output_templates(env, config).items():
        module_file = f"{config.output_name}/{out_name}"
        try:
            source = env.get_template(template).render(context, module_file=module_file)
        except jinja2.TemplateError as exc:
            raise _template_error(env, exc) from None
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


def _probe_name(number: int) -> str:
    # What a row's name becomes in the probe rendering; no real name looks like it.
    return f"_specgen_probe_row_{number}_"


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


def check_name_clashes(env: jinja2.Environment, table: Table, config: Config) -> None:
    """Refuse a row whose name the generated code would use for something else.

    The templates are rendered once more with every row's name replaced by a probe name
    no template can contain. In that rendering, a module that uses a row's probe name as a
    Python name (a local the rebuild binds, say) must not use the row's real name for
    anything else: that name is reserved there. So the reserved names are read off the
    rendered code itself, whatever the templates bind today.
    """
    probe = dataclasses.replace(
        table,
        rows=tuple(dataclasses.replace(row, name=_probe_name(row.number)) for row in table.rows),
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
        for row in table.rows:
            if _probe_name(row.number) in names and row.name in first_use:
                use = first_use[row.name]
                problems.append(
                    f"table row {row.number} ({row.name}): name {row.name!r} clashes with the "
                    f"generated code: {config.output_name}/{out_name} names a Python variable "
                    f"after the field, and already {use.how}.\n"
                    "  Rename the field (and its row)."
                )
    if problems:
        raise GeneratorError("\n".join(problems))
