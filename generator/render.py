"""Render every ``*.py.j2`` template with the validated table.

The set of known kinds is read off the macros of ``kinds.j2``: a kind exists when its
macro does. Every literal reaches the output through ``pyrepr``, never raw.
"""

from __future__ import annotations

import ast
import builtins
import json
import traceback
from pathlib import Path
from typing import Any

import jinja2

from generator.config import Config
from generator.errors import GeneratorError
from generator.table import EXEMPT, INJECTIONS, PARAM_PLAN, Row, Table

KINDS_TEMPLATE = "kinds.j2"
TEMPLATE_SUFFIX = ".py.j2"


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
    """How a key extends an error path: ``.key`` for an identifier, else ``["key"]``."""
    return f".{key}" if key.isidentifier() else f"[{json.dumps(key)}]"


def make_environment(templates: Path) -> jinja2.Environment:
    """The one Jinja2 environment: strict about undefined names, exact about whitespace."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = pyrepr
    env.filters["path_suffix"] = path_suffix
    return env


def _template_location(exc: BaseException) -> str:
    # Jinja rewrites tracebacks so template frames carry the template's file and line.
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.endswith(".j2"):
            return f"{Path(frame.filename).name}:{frame.lineno}"
    lineno = getattr(exc, "lineno", None)
    name = getattr(exc, "name", None) or getattr(exc, "filename", None)
    return f"{name}:{lineno}" if name else "templates"


def known_kinds(env: jinja2.Environment) -> dict[str, tuple[str, ...]]:
    """``{"freeze": (...), "rebuild": (...)}``: the kinds that have a macro in kinds.j2."""
    try:
        module = env.get_template(KINDS_TEMPLATE).module
    except jinja2.TemplateError as exc:
        raise GeneratorError(f"templates/{_template_location(exc)}: {exc}") from None
    macros = sorted(name for name in dir(module) if not name.startswith("_"))
    return {
        step: tuple(name.removeprefix(f"{step}_") for name in macros if name.startswith(f"{step}_"))
        for step in ("freeze", "rebuild")
    }


def template_names(env: jinja2.Environment) -> list[str]:
    """The templates that become output files, sorted."""
    return sorted(name for name in env.list_templates() if name.endswith(TEMPLATE_SUFFIX))


# What the generated function around a macro's block binds: the spec (freeze), the
# error path and the dict written to or read from (passed to the macro as "target").
_BLOCK_CONTEXT = frozenset({"spec", "path", "target"})


def _called_functions(env: jinja2.Environment, rows: tuple[Row, ...], step: str) -> list[str]:
    """The functions the rows' ``step`` blocks call, read off the rendered blocks, so the
    generated imports are exactly what the code uses (``admit`` only where a row's value
    is read back at freeze, say), whatever the macros emit."""
    module = env.get_template(KINDS_TEMPLATE).module
    used: set[str] = set()
    for row in rows:
        block = str(getattr(module, f"{step}_{getattr(row, step)}")(row, "target"))
        names = [node for node in ast.walk(ast.parse(block)) if isinstance(node, ast.Name)]
        bound = {node.id for node in names if isinstance(node.ctx, ast.Store)}
        used |= {node.id for node in names if isinstance(node.ctx, ast.Load)} - bound
    return sorted(used - _BLOCK_CONTEXT - set(dir(builtins)))


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
        "param_plan_keys": tuple(row.key for row in param_plan),
        "injection_keys": tuple(row.key for row in injections),
        "freeze_functions": _called_functions(env, crossing, "freeze"),
        "rebuild_functions": _called_functions(env, crossing, "rebuild"),
    }


def render_all(env: jinja2.Environment, table: Table, config: Config) -> dict[str, str]:
    """Render each template to Python source (unformatted), keyed by output file name."""
    try:
        context = _context(env, table)
    except jinja2.TemplateError as exc:
        raise GeneratorError(f"templates/{_template_location(exc)}: {exc}") from None
    except SyntaxError as exc:
        raise GeneratorError(
            f"templates/{KINDS_TEMPLATE}: a macro rendered invalid Python: {exc.msg}\n"
            f"  {(exc.text or '').strip()}"
        ) from None
    sources: dict[str, str] = {}
    for name in template_names(env):
        out_name = name.removesuffix(".j2")
        module_file = f"{config.output_name}/{out_name}"
        try:
            source = env.get_template(name).render(context, module_file=module_file)
        except jinja2.TemplateError as exc:
            raise GeneratorError(f"templates/{_template_location(exc)}: {exc}") from None
        try:
            ast.parse(source, filename=module_file)
        except SyntaxError as exc:
            raise GeneratorError(
                f"templates/{name} rendered invalid Python at line {exc.lineno}: {exc.msg}\n"
                f"  {(exc.text or '').strip()}"
            ) from None
        sources[out_name] = source
    return sources
