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
SETTINGS = ("format", "kinds", "templates", "output", "outputs", "tables")
TABLE_KEYS = ("rows", "retired", "class")
TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")
# Output files are named by a plain file name (no folder, no hidden file): Python modules,
# and the artifact's JSON Schema, field reference and table lock (.json, .md).
OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\.(py|json|md)")


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
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GeneratorError(f"cannot read {pyproject}: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already says "(at line L, column C)".
        raise GeneratorError(
            f"{pyproject} is not valid TOML: {exc}; fix the file and run again"
        ) from None


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding a pyproject.toml with [tool.specgen];
    one that mentions specgen but is not valid TOML stops the search with the TOML error."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        try:
            mentions_specgen = "specgen" in pyproject.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if mentions_specgen and isinstance(_section(read_pyproject(pyproject)), dict):
            return folder
    raise GeneratorError(
        f"no pyproject.toml with a {SECTION} section at or above {start}; "
        "run specgen inside the project or pass --root"
    )


def _section(data: dict[str, Any]) -> object:
    tool = data.get("tool", {})
    return tool.get("specgen") if isinstance(tool, dict) else None


def _black_pin(project: dict[str, object]) -> str:
    extras = project.get("optional-dependencies", {})
    codegen = extras.get("codegen", []) if isinstance(extras, dict) else []
    for requirement in codegen:
        match = re.fullmatch(r"black==([0-9][0-9A-Za-z.]*)", str(requirement).replace(" ", ""))
        if match:
            return match[1]
    raise GeneratorError(
        'pyproject.toml: the `codegen` extra must pin black exactly (e.g. "black==26.10.1"): '
        "black decides the bytes of generated code"
    )


def _folder(root: Path, pyproject: Path, key: str, value: str) -> Path:
    """A folder setting, resolved; it must be a relative path to a folder inside the project."""
    setting = f'{pyproject}: {SECTION} {key} = "{value}"'
    if Path(value).is_absolute() or PurePosixPath(value).is_absolute():
        raise GeneratorError(
            f"{setting} is an absolute path; give it relative to pyproject.toml "
            f'(e.g. "{Path(value).name or key}")'
        )
    folder = (root / value).resolve()
    if folder == root:
        raise GeneratorError(f"{setting} is the project folder itself; name a folder inside it")
    if not folder.is_relative_to(root):
        raise GeneratorError(
            f"{setting} points outside the project ({root}); specgen reads and writes only "
            "inside it: name a folder inside the project"
        )
    return folder


def _outputs(pyproject: Path, value: object) -> tuple[str, ...]:
    example = '["__init__.py", "freeze.py", "rebuild.py"]'
    if not isinstance(value, list) or not value:
        raise GeneratorError(
            f"{pyproject}: {SECTION} outputs must be a non-empty list of the files the "
            f"generator writes, each from its template <name>.j2, e.g. outputs = {example}"
        )
    for name in value:
        if not isinstance(name, str) or not OUTPUT_NAME.fullmatch(name):
            raise GeneratorError(
                f"{pyproject}: {SECTION} outputs: {name!r} is not an output file name "
                "(a plain file name ending in .py, .json or .md, no folder), "
                f"e.g. outputs = {example}"
            )
    duplicates = sorted({name for name in value if value.count(name) > 1})
    if duplicates:
        raise GeneratorError(
            f"{pyproject}: {SECTION} outputs lists {', '.join(duplicates)} more than once; "
            "list each output once"
        )
    return tuple(value)


def _tables(pyproject: Path, value: object) -> tuple[TableConfig, ...]:
    example = (
        '[tool.specgen.tables.spec] rows = "pkg.fields:SPEC_FIELDS", retired = '
        '"pkg.fields:RETIRED_KEYS", class = "pkg.spec:Spec"'
    )
    if not isinstance(value, dict) or not value:
        raise GeneratorError(
            f"{pyproject}: {SECTION} needs its field tables, one section each, e.g. {example}"
        )
    tables = []
    for name, section in value.items():
        where = f"{pyproject}: [tool.specgen.tables.{name}]"
        if not TABLE_NAME.fullmatch(name):
            raise GeneratorError(f"{where}: a table name is lowercase letters, digits and _")
        if not isinstance(section, dict):
            raise GeneratorError(f"{where} must be a table, e.g. {example}")
        unknown = sorted(set(section) - {*TABLE_KEYS, "filled_elsewhere"})
        if unknown:
            raise GeneratorError(
                f"{where}: unknown setting {unknown[0]!r}; known: {', '.join(TABLE_KEYS)}, "
                "filled_elsewhere"
            )
        for key in TABLE_KEYS:
            if not isinstance(section.get(key), str) or not re.fullmatch(
                r"[\w.]+:\w+", section[key]
            ):
                raise GeneratorError(f'{where}: {key} must read "package.module:NAME"')
        filled = section.get("filled_elsewhere", [])
        if not isinstance(filled, list) or not all(isinstance(f, str) for f in filled):
            raise GeneratorError(
                f"{where}: filled_elsewhere must be a list of field names another table fills"
            )
        tables.append(
            TableConfig(name, section["rows"], section["retired"], section["class"], tuple(filled))
        )
    return tuple(tables)


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
    for key in SETTINGS[:4]:  # outputs, tables: below
        if not isinstance(section.get(key), str) or not section[key]:
            raise GeneratorError(f"{pyproject}: {SECTION} needs a string `{key}`")
    for key in ("kinds", "format"):
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", section[key]):
            raise GeneratorError(
                f'{pyproject}: {SECTION} {key} = "{section[key]}" must be a module name, '
                'e.g. "shardplan.convert.kinds"'
            )
    project = data.get("project", {})
    config = Config(
        root=root,
        tables=_tables(pyproject, section.get("tables")),
        format=section["format"],
        kinds=section["kinds"],
        templates=_folder(root, pyproject, "templates", section["templates"]),
        output=_folder(root, pyproject, "output", section["output"]),
        outputs=_outputs(pyproject, section.get("outputs")),
        black_pin=_black_pin(project if isinstance(project, dict) else {}),
    )
    if unknown := sorted(set(section) - set(SETTINGS)):
        raise GeneratorError(f"{pyproject}: {SECTION} has no setting `{unknown[0]}`: remove it")
    return config
