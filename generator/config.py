"""The generator's settings, ``[tool.specgen]`` of pyproject.toml, checked before any use."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import msgspec

from .errors import GeneratorError

SECTION = "[tool.specgen]"
# Output files are named by a plain file name (no folder, no hidden file): Python modules,
# and the artifact's JSON Schema, field reference and table lock (.json, .md).
OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\.(py|json|md)")
_TABLE = (
    '[tool.specgen.tables.spec] rows = "pkg.fields:SPEC_FIELDS", retired = '
    '"pkg.fields:RETIRED_KEYS", class = "pkg.spec:Spec"'
)
# Each setting as it may read, shown in any message about it.
EXAMPLES = {
    "format": 'format = "shardplan.table.format"',
    "kinds": 'kinds = "shardplan.table.kinds"',
    "templates": 'templates = "templates"',
    "output": 'output = "generated"',
    "outputs": 'outputs = ["__init__.py", "freeze.py"], each rendered from <name>.j2',
    "filled_elsewhere": 'filled_elsewhere = ["modules"], fields another table fills',
    **dict.fromkeys(("tables", "rows", "retired", "class"), _TABLE),
}

# Shapes of the settings: "package.module", "package.module:NAME", an output, a table's name.
_Module = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")]
_Target = Annotated[str, msgspec.Meta(pattern=r"^[\w.]+:\w+\Z")]
_Output = Annotated[str, msgspec.Meta(pattern=rf"^{OUTPUT_NAME.pattern}\Z")]
_TableName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]*\Z")]

class _Section(msgspec.Struct, forbid_unknown_fields=True):
    format: _Module
    kinds: _Module
    templates: str  # "" is refused as the project folder itself (_folder)
    output: str
    outputs: Annotated[list[_Output], msgspec.Meta(min_length=1)]
    tables: Annotated[dict[_TableName, object], msgspec.Meta(min_length=1)]


class _Table(msgspec.Struct, forbid_unknown_fields=True):
    rows: _Target
    retired: _Target
    cls: _Target = msgspec.field(name="class")
    filled_elsewhere: tuple[str, ...] = ()


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


def _convert(value: object, shape: type[Any], where: str) -> Any:
    """``value`` as ``shape``; a setting of the wrong shape is a GeneratorError naming it and
    showing how it may read (an unknown one: to remove)."""
    try:
        return msgspec.convert(value, shape, strict=True)
    except msgspec.ValidationError as exc:
        problem, _, at = str(exc).partition(" - at ")
        place = re.sub(r"`\$?\.?", "", at)  # `$.outputs[0]` -> outputs[0]
        setting = re.search(r"field `(\w+)`|`\$\.(\w+)", str(exc))
        name = (setting[1] or setting[2]) if setting else "tables"
        fix = f"e.g. {EXAMPLES[name]}" if name in EXAMPLES else "remove it"
        raise GeneratorError(f"{' '.join(filter(None, (where, place)))}: {problem}; {fix}") from None


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
    settings = _convert(section, _Section, f"{pyproject}: {SECTION}")
    outputs = settings.outputs
    if duplicates := sorted({name for name in outputs if outputs.count(name) > 1}):
        raise GeneratorError(
            f"{pyproject}: {SECTION} outputs lists {', '.join(duplicates)} more than once; "
            "list each output once"
        )
    tables = []
    for name, value in settings.tables.items():
        table = _convert(value, _Table, f"{pyproject}: [tool.specgen.tables.{name}]")
        tables.append(TableConfig(name, *msgspec.structs.astuple(table)))
    project = data.get("project", {})
    return Config(
        root=root,
        tables=tuple(tables),
        format=settings.format,
        kinds=settings.kinds,
        templates=_folder(root, pyproject, "templates", settings.templates),
        output=_folder(root, pyproject, "output", settings.output),
        outputs=tuple(outputs),
        black_pin=_black_pin(project if isinstance(project, dict) else {}),
    )
