"""Render each declared output from its template; every row's block is decided in Python."""

from __future__ import annotations

import json
import traceback
from functools import partial
from pathlib import Path
from typing import Any

import jinja2

from .artifact_schema import schema_globals
from .blocks import Blocks, module_imports
from .cache import Bytecode
from .config import Config
from .errors import GeneratorError
from .kinds import KindFacts
from .table import Format, Tables

KINDS_TEMPLATE = "kinds.j2"
TEMPLATE_SUFFIX = ".j2"
# Templates that render an output file: each must be a declared output.
OUTPUT_TEMPLATE_SUFFIXES = (".py.j2", ".json.j2", ".md.j2")


def pyrepr(value: Any) -> str:
    """A Python literal for a str, int, bool, None or a tuple of them."""
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, jinja2.Undefined):
            item._fail_with_undefined_error()  # StrictUndefined: raises, naming the variable
        if item is not None and not isinstance(item, (str, int, bool)):
            raise jinja2.TemplateRuntimeError(
                f"pyrepr: {item!r} ({type(item).__name__}) has no safe literal form"
            )
    return repr(value)


def make_environment(config: Config, kinds: KindFacts, form: Format) -> jinja2.Environment:
    """The one Jinja2 environment: strict about undefined names, exact about whitespace; its
    templates checked first (each UTF-8, kinds.j2 and one for each declared output only)."""
    folder = config.templates_name
    if not config.templates.is_dir():
        raise GeneratorError(
            f"the templates folder {folder}/ does not exist: restore it (git checkout -- "
            f"{folder}), or fix `templates` in [tool.specgen] of pyproject.toml"
        )
    found = set()
    for path in sorted(config.templates.rglob(f"*{TEMPLATE_SUFFIX}")):
        template = path.relative_to(config.templates).as_posix()
        name, output = f"{folder}/{template}", template.removesuffix(TEMPLATE_SUFFIX)
        if template.endswith(OUTPUT_TEMPLATE_SUFFIXES) and output not in config.outputs:
            raise GeneratorError(
                f'{name} renders no declared output: add "{output}" to outputs in '
                "[tool.specgen] of pyproject.toml, or remove the template"
            )
        found.add(template)
        try:
            data = path.read_bytes()
            data.decode("utf-8")
        except OSError as exc:
            raise GeneratorError(f"cannot read {name}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            where = f"{name}:{line}: byte 0x{data[exc.start]:02x}"
            raise GeneratorError(f"{where} is not UTF-8: save the file as UTF-8") from None
    if KINDS_TEMPLATE not in found:
        raise GeneratorError(f"{folder}/{KINDS_TEMPLATE} is missing: restore it")
    for output in config.outputs:
        if f"{output}{TEMPLATE_SUFFIX}" not in found:
            raise GeneratorError(
                f"{config.output_name}/{output} is a declared output, but its template "
                f"{folder}/{output}{TEMPLATE_SUFFIX} is missing: restore it, or remove "
                f'"{output}" from outputs in [tool.specgen] of pyproject.toml'
            )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(config.templates), encoding="utf-8"),
        bytecode_cache=Bytecode(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = pyrepr
    env.filters["json"] = json.dumps  # JSON outputs: every value goes through it
    env.filters["merged"] = lambda first, second: {**first, **second}
    env.globals["fmt"] = form.module
    env.globals["kinds_module"] = kinds.module
    env.globals["kind_names_module"] = config.kinds
    env.globals["module_imports"] = partial(module_imports, kinds.defined)
    env.globals.update(schema_globals(kinds))
    return env


def _template_error(folder: str, exc: Exception) -> GeneratorError:
    """A one-place message for a Jinja error: ``templates/<file>:<line>: <what>``."""
    if isinstance(exc, jinja2.TemplateNotFound):
        return GeneratorError(f"{folder}/: template {exc.name!r} not found (imported by another)")
    # A frame of kinds.j2's macros runs compiled code (Jinja rewrites only render()'s frames).
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


def render_outputs(
    env: jinja2.Environment,
    tables: Tables,
    config: Config,
    blocks: Blocks,
    lock: dict[str, Any],
) -> dict[str, str]:
    """Render each declared output (unformatted) once, by file name; ``lock``: the table lock."""
    context = {
        "tables": tables,
        "table_digests": {table.module: table.digest for table in tables},
        "blocks": blocks,
        "w": blocks.words,
        "lock": lock,
    }
    sources: dict[str, str] = {}
    for out_name in config.outputs:
        template = f"{out_name}{TEMPLATE_SUFFIX}"
        module_file = f"{config.output_name}/{out_name}"
        try:  # any error a template raises ({{ 1 // 0 }} too): one message, never a traceback
            source = env.get_template(template).render(context, module_file=module_file)
        except GeneratorError:
            raise
        except Exception as exc:
            raise _template_error(config.templates_name, exc) from None
        if out_name.endswith(".json"):  # invalid Python is found by black's parse (emit)
            try:
                json.loads(source)
            except ValueError as exc:
                where = f"{config.templates_name}/{template}"
                raise GeneratorError(f"{where} rendered invalid JSON: {exc}") from None
        sources[out_name] = source
    return sources
