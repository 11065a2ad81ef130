"""Read the generator's settings from ``[tool.specgen]`` in pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from generator.errors import GeneratorError

REQUIRED_KEYS = ("table", "spec_class", "templates", "output")


@dataclass(frozen=True)
class Config:
    """Where the table, the spec class and the templates are, and where output goes."""

    root: Path
    table: str  # "module:ATTRIBUTE"
    spec_class: str  # "module:Class"
    templates: Path
    output: Path
    black_pin: str  # the exact black version pinned in the `codegen` extra

    @property
    def output_name(self) -> str:
        """The output folder as written in generated code and messages: relative, POSIX."""
        return self.output.relative_to(self.root).as_posix()


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding a pyproject.toml with [tool.specgen]."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "[tool.specgen]" in pyproject.read_text(encoding="utf-8"):
            return folder
    raise GeneratorError(
        f"no pyproject.toml with a [tool.specgen] section at or above {start}; "
        "run specgen inside the project or pass --root"
    )


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


def load_config(root: Path) -> Config:
    """Parse ``root/pyproject.toml``; every missing or malformed setting is a GeneratorError."""
    pyproject = root / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read {pyproject}: {exc}") from None
    section = data.get("tool", {}).get("specgen")
    if not isinstance(section, dict):
        raise GeneratorError(f"{pyproject} has no [tool.specgen] section")
    for key in REQUIRED_KEYS:
        if not isinstance(section.get(key), str) or not section[key]:
            raise GeneratorError(f"{pyproject}: [tool.specgen] needs a string `{key}`")
    for key in ("table", "spec_class"):
        if not re.fullmatch(r"[\w.]+:\w+", section[key]):
            raise GeneratorError(
                f'{pyproject}: [tool.specgen] {key} = "{section[key]}" must read "package.module:NAME"'
            )
    return Config(
        root=root,
        table=section["table"],
        spec_class=section["spec_class"],
        templates=root / section["templates"],
        output=root / section["output"],
        black_pin=_black_pin(data.get("project", {})),
    )
