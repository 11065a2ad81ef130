"""The generator's settings, ``[tool.specgen]`` of pyproject.toml, checked before any use."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import GeneratorError

SECTION = "[tool.specgen]"
# A plain file name (no folder, no hidden file): a module, the schema, fields.md, the lock.
OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\.(py|json|md)")
MODULE, TARGET = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", r"[\w.]+:\w+"  # pkg.module, pkg.module:NAME
_TABLE = (
    '[tool.specgen.tables.spec] rows = "pkg.fields:SPEC_FIELDS", retired = '
    '"pkg.fields:RETIRED_KEYS", class = "pkg.spec:Spec" (a section a table, named in a-z, 0-9, _)'
)
# Each setting's shape (a pattern a text matches whole, [pattern] a list of such texts,
# dict a table of tables) and how it may read, shown with any message about it.
SETTINGS: dict[str, tuple[object, str]] = {
    "format": (MODULE, 'format = "shardplan.table.format" (a module name)'),
    "kinds": (MODULE, 'kinds = "shardplan.table.kinds" (a module name)'),
    "templates": (".*", 'templates = "templates"'),
    "output": (".*", 'output = "generated"'),
    "outputs": ([OUTPUT_NAME.pattern], 'outputs = ["freeze.py", "fields.md"] (.py, .json, .md)'),
    "tables": (dict, _TABLE),
}
TABLE_SETTINGS: dict[str, tuple[object, str]] = {
    **dict.fromkeys(("rows", "retired", "class"), (TARGET, _TABLE)),
    "filled_elsewhere": ([r"\w+"], 'filled_elsewhere = ["modules"] (fields another table fills)'),
}


@dataclass(frozen=True)
class TableConfig:
    """One field table: its rows, its retired keys and the dataclass it describes."""

    name: str  # as the templates name it: tables.<name>
    rows: str  # "module:ATTRIBUTE"
    retired: str  # "module:ATTRIBUTE"
    cls: str  # "module:Class"
    filled_elsewhere: tuple[str, ...]  # fields of the class another table fills (no row)

    @property
    def setting(self) -> str:
        return f"[tool.specgen.tables.{self.name}]"


@dataclass(frozen=True)
class Config:
    """Where the tables, the kinds and the templates are, and what goes where."""

    root: Path  # the folder of pyproject.toml, resolved
    tables: tuple[TableConfig, ...]  # in the order declared
    format: str  # "package.module": the format's names (groups, reserved keys, patterns)
    kinds: str  # "package.module": the kinds' functions and declarations, read as source
    templates: Path  # a folder inside root
    output: Path  # a folder inside root
    outputs: tuple[str, ...]  # the declared output files, each rendered from "<name>.j2"
    black_pin: str  # the exact black version pinned in the `codegen` extra

    @property
    def output_name(self) -> str:
        """The output folder as written in generated code and messages: relative, POSIX."""
        return self.output.relative_to(self.root).as_posix()

    @property
    def templates_name(self) -> str:
        """The templates folder as written in generated code and messages: relative, POSIX."""
        return self.templates.relative_to(self.root).as_posix()


def read_pyproject(pyproject: Path) -> dict[str, Any]:
    """Parse a pyproject.toml; an unreadable or invalid file is a GeneratorError saying where."""
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot read {pyproject}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:  # its message says "(at line L, column C)"
        raise GeneratorError(f"{pyproject} is not valid TOML: {exc}; fix the file") from None


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding a pyproject.toml with [tool.specgen];
    one that mentions specgen but is not valid TOML stops the search with the TOML error."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        try:
            text = pyproject.read_text(encoding="utf-8", errors="replace")
        except OSError:  # none here, or unreadable: look further up
            continue
        if "specgen" in text and isinstance(_section(read_pyproject(pyproject)), dict):
            return folder
    raise GeneratorError(f"no pyproject.toml with {SECTION} at or above {start}: pass --root")


def _section(data: dict[str, Any]) -> object:
    tool = data.get("tool", {})
    return tool.get("specgen") if isinstance(tool, dict) else None


def _black_pin(project: dict[str, object]) -> str:
    extras = project.get("optional-dependencies", {})
    codegen = extras.get("codegen", []) if isinstance(extras, dict) else []
    for requirement in codegen:
        if match := re.fullmatch(r"black==([0-9][0-9A-Za-z.]*)", str(requirement).replace(" ", "")):
            return match[1]
    raise GeneratorError('pyproject.toml: the `codegen` extra must pin black ("black==26.10.1")')


def _folder(root: Path, pyproject: Path, key: str, value: str) -> Path:
    setting = f'{pyproject}: {SECTION} {key} = "{value}"'
    if Path(value).is_absolute() or PurePosixPath(value).is_absolute():
        raise GeneratorError(f"{setting} is an absolute path; give it relative to pyproject.toml")
    folder = (root / value).resolve()
    if folder == root or not folder.is_relative_to(root):
        raise GeneratorError(f"{setting} is not inside the project {root}: name a folder in it")
    return folder


def _fits(value: object, shape: object) -> bool:
    if isinstance(shape, list):
        return isinstance(value, list) and all(_fits(item, shape[0]) for item in value)
    if shape is dict:
        return isinstance(value, dict) and bool(value)
    return isinstance(value, str) and re.fullmatch(str(shape), value) is not None


def _check(section: dict[str, Any], shapes: dict[str, tuple[object, str]], where: str) -> None:
    """Refuse a setting missing, unknown or not of its shape, showing how it reads."""
    for key, (shape, example) in shapes.items():
        if not _fits(section.get(key), shape):
            wrong = "is missing" if key not in section else f"= {section[key]!r} is not of its form"
            raise GeneratorError(f"{where} {key} {wrong}; write it like {example}")
    if unknown := sorted(set(section) - set(shapes)):
        raise GeneratorError(f"{where} has no setting `{unknown[0]}`: remove it")


def load_config(root: Path) -> Config:
    """Parse ``root/pyproject.toml``; every missing or malformed setting is a GeneratorError."""
    root = root.resolve()
    pyproject = root / "pyproject.toml"
    data = read_pyproject(pyproject)
    section = _section(data)
    if not isinstance(section, dict):
        tool = data.get("tool", {})
        close = difflib.get_close_matches("specgen", list(tool) if isinstance(tool, dict) else [])
        hint = f" (found [tool.{close[0]}]: a typo?)" if close else ""
        raise GeneratorError(f"{pyproject} has no {SECTION} section{hint}")
    where = f"{pyproject}: {SECTION}"
    _check(section, SETTINGS, where)
    outputs = section["outputs"]
    if not outputs or len(set(outputs)) < len(outputs):
        raise GeneratorError(f"{where} outputs: name at least one file, and each once")
    tables = []
    for name, table in section["tables"].items():
        where = f"{pyproject}: [tool.specgen.tables.{name}]"
        if not re.fullmatch("[a-z][a-z0-9_]*", name) or not isinstance(table, dict):
            raise GeneratorError(f"{where}: write each table like {_TABLE}")
        table = {"filled_elsewhere": [], **table}
        _check(table, TABLE_SETTINGS, where)
        filled = tuple(table["filled_elsewhere"])
        tables.append(TableConfig(name, table["rows"], table["retired"], table["class"], filled))
    project = data.get("project", {})
    return Config(
        root=root,
        tables=tuple(tables),
        format=section["format"],
        kinds=section["kinds"],
        templates=_folder(root, pyproject, "templates", section["templates"]),
        output=_folder(root, pyproject, "output", section["output"]),
        outputs=tuple(outputs),
        black_pin=_black_pin(project if isinstance(project, dict) else {}),
    )
