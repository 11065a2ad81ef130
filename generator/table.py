"""Load the field table and the spec class it describes, and refuse a bad table.

Every problem is reported with the row's number and name and the fix, all at once,
before anything is rendered or written.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import keyword
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.config import Config
from generator.errors import GeneratorError
from shardplan.artifact.plan_meta import MATCH_KEY

# The group names of SPEC §2. Kinds are not listed here: they are the macros of kinds.j2.
PARAM_PLAN, INJECTIONS, EXEMPT = "param_plan", "injections", "exempt"
GROUPS = (PARAM_PLAN, INJECTIONS, EXEMPT)

# Keys the artifact format itself uses inside an entry or a rule, by group, and why: a row
# frozen under one of them would overwrite it (shardplan.artifact.plan_meta writes and reads them).
RESERVED_KEYS: dict[str, dict[str, str]] = {
    PARAM_PLAN: {},
    INJECTIONS: {MATCH_KEY: "it names the module FQN a rule applies to"},
}


@dataclass(frozen=True)
class Row:
    """One validated table row, as the templates see it."""

    number: int  # 1-based, as a reviewer counts rows
    name: str
    key: str
    group: str
    freeze: str
    rebuild: str
    post_init: bool
    doc: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def freeze_macro(self) -> str:
        return f"freeze_{self.freeze}"

    @property
    def rebuild_macro(self) -> str:
        return f"rebuild_{self.rebuild}"


@dataclass(frozen=True)
class Retired:
    """A validated retired key: rebuild accepts it in ``group`` and drops it."""

    key: str
    group: str
    reason: str


@dataclass(frozen=True)
class Table:
    """The validated table and the facts about it the generated code depends on."""

    rows: tuple[Row, ...]
    source_file: str  # the table's file, relative to the project root
    digest: str  # computed by the table module's own table_digest()
    retired: tuple[Retired, ...] = ()

    def group(self, group: str) -> tuple[Row, ...]:
        return tuple(row for row in self.rows if row.group == group)

    def retired_keys(self, group: str) -> tuple[str, ...]:
        """The retired keys rebuild accepts and drops in ``group``, in table order."""
        return tuple(gone.key for gone in self.retired if gone.group == group)


@dataclass(frozen=True)
class LoadedTable:
    """What was imported, before validation."""

    rows: tuple[Any, ...]
    spec_fields: dict[str, bool]  # dataclass field name -> init flag
    source_file: str
    digest: Callable[..., str]  # table_digest(rows, retired)
    spec_name: str
    retired: tuple[Any, ...] = ()  # the table module's RETIRED_KEYS, if it declares them


# The attribute of the table module that declares retired keys (optional).
RETIRED_ATTRIBUTE = "RETIRED_KEYS"


def _import(target: str, root: Path, what: str) -> tuple[Any, Any]:
    module_name, _, attribute = target.partition(":")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name)
    except SystemExit as exc:  # user code may call sys.exit(); that must not end specgen
        raise GeneratorError(
            f"importing the {what} module {module_name!r} called sys.exit({exc.code!r}); "
            "it must only define data: remove the exit from the module's top level"
        ) from None
    except Exception as exc:  # the table module is user code: report, never traceback
        raise GeneratorError(f"cannot import the {what} module {module_name!r}: {exc}") from None
    if not hasattr(module, attribute):
        raise GeneratorError(f"{module_name} has no {attribute!r}: fix `{what}` in [tool.specgen]")
    return module, getattr(module, attribute)


def _relative_file(module: Any, root: Path) -> str:
    path = Path(getattr(module, "__file__", "") or module.__name__).resolve()
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(
            module.__name__
        )  # outside the project: the module's name, never an absolute path


def load_table(config: Config) -> LoadedTable:
    """Import the table and the spec class named in the config."""
    table_module, rows = _import(config.table, config.root, "table")
    _, spec_class = _import(config.spec_class, config.root, "spec_class")
    if not isinstance(rows, (tuple, list)):
        raise GeneratorError(
            f"{config.table} must be a tuple of SpecField rows, got {type(rows).__name__}"
        )
    if not dataclasses.is_dataclass(spec_class):
        raise GeneratorError(f"{config.spec_class} must be a dataclass")
    digest = getattr(table_module, "table_digest", None)
    if not callable(digest):
        raise GeneratorError(
            f"{table_module.__name__} must define table_digest(rows): the staleness guard of "
            "generated code calls it on import"
        )
    retired = getattr(table_module, RETIRED_ATTRIBUTE, ())
    if not isinstance(retired, (tuple, list)):
        raise GeneratorError(
            f"{table_module.__name__}.{RETIRED_ATTRIBUTE} must be a tuple of RetiredKey, "
            f"got {type(retired).__name__}"
        )
    return LoadedTable(
        rows=tuple(rows),
        spec_fields={f.name: f.init for f in dataclasses.fields(spec_class)},
        source_file=_relative_file(table_module, config.root),
        digest=digest,
        spec_name=config.spec_class,
        retired=tuple(retired),
    )


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _row_problems(
    row: Row, kinds: dict[str, tuple[str, ...]], spec_fields: dict[str, bool]
) -> list[str]:
    problems = []
    if not row.name.isidentifier() or keyword.iskeyword(row.name):
        problems.append("name is not a Python identifier.\n  Use the dataclass field's name.")
    elif row.name not in spec_fields:
        problems.append(
            f"the spec class has no field {row.name!r}.\n"
            "  Add the field to the dataclass, or remove the row."
        )
    if row.group not in GROUPS:
        problems.append(
            f"unknown group {row.group!r}.\n  Known groups: {', '.join(GROUPS)}."
            + _did_you_mean(row.group, GROUPS)
        )
    elif row.group == EXEMPT:
        if row.key or row.freeze or row.rebuild or row.post_init or row.aliases:
            problems.append(
                'an exempt row never crosses the artifact, so key, freeze and rebuild must be "", '
                "aliases empty and post_init False.\n  Clear them, or move the row to group "
                "'param_plan' or 'injections'."
            )
        return problems
    if not row.doc.strip():
        problems.append(
            "a row that crosses the artifact needs a one-line doc: the schema and the field "
            'reference show it.\n  Set doc="...".'
        )
    if not row.key:
        problems.append(f"a {row.group} row needs the key it is frozen under.\n  Set key=...")
    elif row.key in RESERVED_KEYS.get(row.group, {}):
        problems.append(
            f"key {row.key!r} is reserved by the artifact format in {row.group}: "
            f"{RESERVED_KEYS[row.group][row.key]}.\n  Choose another key."
        )
    for step in ("freeze", "rebuild"):
        kind = getattr(row, step)
        if kind not in kinds[step]:
            problems.append(
                f"unknown {step} kind {kind!r}.\n  Known kinds: {', '.join(kinds[step])}."
                + _did_you_mean(kind, kinds[step])
            )
    init = spec_fields.get(row.name)
    if init is not None and row.post_init == init:
        fix = (
            "Set post_init=True (the rebuild sets it after construction), or make the field init=True."
            if not init
            else "Set post_init=False, or declare the field with field(init=False)."
        )
        problems.append(
            f"post_init={row.post_init} but the dataclass field has init={init}.\n  {fix}"
        )
    return problems


def _to_row(number: int, raw: Any) -> Row:
    try:
        row = Row(
            number,
            raw.name,
            raw.key,
            raw.group,
            raw.freeze,
            raw.rebuild,
            raw.post_init,
            getattr(raw, "doc", ""),
            getattr(raw, "aliases", ()),
        )
    except AttributeError as exc:
        raise GeneratorError(f"table row {number}: {exc}; every row must be a SpecField") from None
    text_fields = (row.name, row.key, row.group, row.freeze, row.rebuild, row.doc)
    if (
        not all(isinstance(value, str) for value in text_fields)
        or not isinstance(row.post_init, bool)
        or not isinstance(row.aliases, tuple)
        or not all(isinstance(alias, str) for alias in row.aliases)
    ):
        raise GeneratorError(
            f"table row {number} ({row.name!r}): name, key, group, freeze, rebuild and doc must "
            "be str, post_init a bool and aliases a tuple of str"
        )
    return row


def _to_retired(number: int, raw: Any) -> Retired:
    try:
        gone = Retired(raw.key, raw.group, raw.reason)
    except AttributeError as exc:
        raise GeneratorError(
            f"{RETIRED_ATTRIBUTE}[{number - 1}]: {exc}; every entry must be a RetiredKey"
        ) from None
    if not all(isinstance(value, str) for value in (gone.key, gone.group, gone.reason)):
        raise GeneratorError(
            f"{RETIRED_ATTRIBUTE}[{number - 1}]: key, group and reason must be str"
        )
    return gone


def _key_problems(rows: tuple[Row, ...], retired: tuple[Retired, ...]) -> list[str]:
    """Every key an artifact may hold (current keys, aliases, retired keys) names one thing."""
    problems: list[str] = []
    owner: dict[str, str] = {}  # key -> what holds it, for the message

    def claim(key: str, holder: str, group: str) -> None:
        if key in RESERVED_KEYS.get(group, {}):
            problems.append(
                f"{holder}: key {key!r} is reserved by the artifact format in {group}: "
                f"{RESERVED_KEYS[group][key]}.\n  Choose another key."
            )
        elif key in owner:
            problems.append(
                f"{holder}: key {key!r} is already {owner[key]}.\n"
                "  A key names one field: choose another, or drop the alias or retirement."
            )
        else:
            owner[key] = holder.replace("table row", "used by row")

    for row in rows:
        if row.key:
            owner.setdefault(row.key, f"used by row {row.number} ({row.name})")
    for row in rows:
        for alias in row.aliases:
            if not alias:
                problems.append(f"table row {row.number} ({row.name}): an alias is empty.")
                continue
            claim(alias, f"table row {row.number} ({row.name}) alias", row.group)
    for index, gone in enumerate(retired):
        holder = f"{RETIRED_ATTRIBUTE}[{index}] ({gone.key})"
        if gone.group not in (PARAM_PLAN, INJECTIONS):
            problems.append(
                f"{holder}: group must be {PARAM_PLAN!r} or {INJECTIONS!r}, where the key was "
                f"written, not {gone.group!r}."
            )
        if not gone.key or not gone.reason.strip():
            problems.append(f"{holder}: a retired key needs its key and a reason.")
            continue
        claim(gone.key, holder, gone.group)
    return problems


def validate(loaded: LoadedTable, kinds: dict[str, tuple[str, ...]]) -> Table:
    """Check every row against the spec class and the known kinds; raise one error listing all."""
    rows = tuple(_to_row(number, raw) for number, raw in enumerate(loaded.rows, start=1))
    retired = tuple(_to_retired(n, raw) for n, raw in enumerate(loaded.retired, start=1))
    problems: list[str] = []
    first_by_name: dict[str, Row] = {}
    first_by_key: dict[str, Row] = {}
    for row in rows:
        where = f"table row {row.number} ({row.name})"
        problems += [
            f"{where}: {problem}" for problem in _row_problems(row, kinds, loaded.spec_fields)
        ]
        if row.name in first_by_name:
            first = first_by_name[row.name]
            problems.append(
                f"{where}: name {row.name!r} already has row {first.number}.\n"
                "  Each spec field has exactly one row: remove one of them."
            )
        first_by_name.setdefault(row.name, row)
        if row.key and row.key in first_by_key:
            first = first_by_key[row.key]
            problems.append(
                f"{where}: key {row.key!r} is already used by row {first.number} ({first.name}).\n"
                "  Frozen keys must be unique: choose another key."
            )
        if row.key:
            first_by_key.setdefault(row.key, row)
    for name in loaded.spec_fields:
        if name not in first_by_name:
            problems.append(
                f"field {name!r} of {loaded.spec_name} has no table row.\n"
                f"  Add a SpecField row for it to {loaded.source_file} "
                "(group 'exempt' if it never crosses the artifact), then run `make codegen`."
            )
    problems += _key_problems(rows, retired)
    if problems:
        raise GeneratorError("\n".join(problems))
    return Table(
        rows=rows,
        source_file=loaded.source_file,
        digest=loaded.digest(loaded.rows, loaded.retired),
        retired=retired,
    )
