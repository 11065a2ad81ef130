"""Load every field table and the dataclass it describes, and refuse a bad table: every
problem at once, each with the table, the row's number and name and the fix."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import importlib
import json
import keyword
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .config import Config, TableConfig
from .errors import GeneratorError
from .kinds import KindFacts, bound_names
from .supervise import imported, importing

if TYPE_CHECKING:
    from shardplan.table.kinds import Crossing

# What a row of each role holds (the roles are the format module's GROUP_ROLES values).
CROSSES, DERIVED, OTHERS, EXEMPT = "crosses", "derived", "others", "exempt"
ROLES = (CROSSES, DERIVED, OTHERS, EXEMPT)
FORMAT_NAMES: tuple[str, ...] = ("TABLE_GROUPS", "GROUP_ROLES", "RESERVED_KEYS", "RETIRABLE_GROUPS")
FORMAT_NAMES += ("TOP_LEVEL_GROUPS", "NESTING_SEPARATOR", "field_path")
_DUNDER = "begins with two underscores, which Python keeps for itself"
# What every check reads of a row and of a retired key, and its type (aliases: of str).
_TEXTS = ("name", "key", "group", "freeze", "rebuild", "doc", "written", "absent")
_ROW: dict[str, type] = {**dict.fromkeys(_TEXTS, str), "post_init": bool, "aliases": tuple}
_RETIRED: dict[str, type] = dict.fromkeys(("key", "group", "reason"), str)


@dataclass(frozen=True)
class Format:
    """The project's format module, as the generator reads it."""

    groups: dict[str, tuple[str, ...]]  # table name -> the groups its rows may use
    roles: dict[str, str]  # group -> role
    module: ModuleType  # the rest, read as it is: RESERVED_KEYS, TOP_LEVEL_GROUPS, ...


@dataclass(frozen=True)
class Table:
    """One validated table and the facts about it the generated code depends on."""

    name: str  # as configured: the templates' tables.<name>
    rows: tuple[Any, ...]  # the table module's rows, as they are
    retired: tuple[Any, ...]
    roles: dict[str, str]  # group -> role
    top_level_groups: tuple[str, ...]  # groups whose keys are the document's top-level keys
    module: str  # the table module, whose table_digest() the staleness guard calls
    source_file: str  # the table's file, relative to the project root
    digest: str  # computed by the table module's own table_digest()
    cls: str  # "module:Class"
    crossings: dict[str, Crossing]  # each keyed row's, resolved once, by row name
    init_fields: tuple[str, ...]  # the class's __init__ parameters, in its order

    def crossing_of(self, row: Any) -> Crossing:
        """The row's crossing: its records, when its key is written, what its absence gives."""
        return self.crossings[row.name]

    def group(self, group: str) -> tuple[Any, ...]:
        """The rows of ``group``, in table order."""
        from shardplan.table.rows import rows_of_group  # the project's: its tables imported it

        return rows_of_group(self.rows, group)

    def role(self, *roles: str) -> tuple[Any, ...]:
        """The rows whose group has one of ``roles``, in table order."""
        return tuple(row for row in self.rows if self.roles[row.group] in roles)

    @property
    def crossing(self) -> tuple[Any, ...]:
        """Every row that crosses the artifact under a key (its group's role: crosses)."""
        return self.role(CROSSES)

    @property
    def keyed(self) -> tuple[Any, ...]:
        """Every row with a key: crossing and derived rows."""
        return self.role(CROSSES, DERIVED)

    def constructed(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The crossing rows rebuild passes ``(by position, by keyword)``; position is faster."""
        passed = {row.name: row for row in self.crossing if not row.post_init}
        positional = []
        for name in self.init_fields:
            if name not in passed:
                break
            positional.append(passed.pop(name))
        return tuple(positional), tuple(passed.values())

    @property
    def positional_names(self) -> tuple[str, ...]:
        """The fields ``constructed`` passes by position, whose order the module checks."""
        return tuple(row.name for row in self.constructed()[0])

    def label(self, row: Any) -> str:
        """The row as messages name it: its table, its 1-based number and its name."""
        return f"{_row_label(self.name)} {self.rows.index(row) + 1} ({row.name})"

    def accepted_keys(self, group: str) -> tuple[str, ...]:
        """The keys strict rebuild accepts in ``group``: keys, aliases, retired keys."""
        from shardplan.table.rows import accepted_keys

        return accepted_keys(self.rows, self.retired, group)

    def own_keys(self, group: str) -> tuple[str, ...]:
        """The keys of ``group``'s rows under their own names: no older name, no retired key."""
        return tuple(row.key for row in self.group(group))

    def null_keys(self, group: str) -> tuple[str, ...]:
        """The keys (and older names) of ``group`` whose null strict rebuild reads: freeze's."""
        rows = [row for row in self.group(group) if self.crossing_of(row).writes_null]
        return tuple(key for row in rows for key in (row.key, *row.aliases))

    def containers(self) -> tuple[str, ...]:
        """The top-level objects that hold nested keys, in table order."""
        return tuple(dict.fromkeys(row.within for row in self.keyed if row.within))

    def top_level(self) -> tuple[tuple[str, Any], ...]:
        """The top-level keys this table owns: ``(key, row)``, or ``(container, None)``."""
        found: dict[str, Any] = {}
        for row in self.keyed:
            if row.group in self.top_level_groups:
                found.setdefault(row.within or row.leaf, None if row.within else row)
        return tuple(found.items())

    def nested(self, container: str) -> tuple[Any, ...]:
        """The rows whose key is nested in ``container``, in table order."""
        return tuple(row for row in self.keyed if row.within == container != "")

    def owned_keys(self, container: str) -> tuple[str, ...]:
        """The keys at the top level ("") or in ``container`` rows own (others rides along)."""
        owned = [
            leaf
            for held in (*self.keyed, *self.retired)  # a retired key has no aliases
            for within, leaf in ((held.within, held.leaf), *getattr(held, "alias_places", ()))
            if within == container and held.group in self.top_level_groups
        ]
        return tuple(dict.fromkeys([*owned, *(() if container else self.containers())]))


@dataclass(frozen=True)
class Tables:
    """Every validated table, in the order configured."""

    tables: tuple[Table, ...]

    def __getitem__(self, name: str) -> Table:
        return next(table for table in self.tables if table.name == name)

    def __iter__(self) -> Iterator[Table]:
        return iter(self.tables)

    @property
    def digest(self) -> str:
        """One digest over every table's own digest, for the generated files' headers."""
        text = json.dumps([[t.name, t.digest] for t in self.tables])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LoadedTable:
    """What was imported for one table, before validation."""

    config: TableConfig
    rows: tuple[Any, ...]
    retired: tuple[Any, ...]
    fields: dict[str, dataclasses.Field[Any]]  # the class's, by name, in its order
    bound: dict[str, str]  # the names the class's module binds itself -> how, for messages
    module: str
    source_file: str
    digest: Callable[..., str]  # table_digest(rows, retired)
    cls: Any = None  # the dataclass, whose annotations the kinds module resolves


def _outside(module: ModuleType, root: Path) -> Path | None:
    file = getattr(module, "__file__", None)
    paths = [
        Path(place).resolve() for place in ([file] if file else getattr(module, "__path__", []))
    ]
    return None if not paths or any(p.is_relative_to(root) for p in paths) else paths[0]


def _shown(file: str | None, root: Path, otherwise: str) -> str:
    """``file`` relative to ``root``; elsewhere ``otherwise``, never a machine's own path."""
    path = Path(file or "").resolve()
    inside = Path(file or "").is_absolute() and path.is_relative_to(root)
    return path.relative_to(root).as_posix() if inside else otherwise


def import_module(name: str, root: Path, what: str) -> ModuleType:
    """Import one of the project's modules from ``root``, never from another checkout."""
    if not sys.path or sys.path[0] != str(root):
        sys.path.insert(0, str(root))
    # A module this process imported before is handed back as it is, whatever the path says.
    parts = name.split(".")
    for held in (".".join(parts[: n + 1]) for n in range(len(parts))):
        if held in sys.modules and (elsewhere := _outside(sys.modules[held], root)):
            raise GeneratorError(
                f"cannot import the {what} module {name!r} from {root}: this process already "
                f"imported {held!r} from {elsewhere}. Run specgen in a fresh process."
            )
    try:
        importing(name)
        module = importlib.import_module(name)
        imported(name)
    except (SystemExit, Exception) as exc:  # user code: report, never traceback nor exit
        # The deepest line of the project's own files, where the bad value is written.
        places = [(f.f_code.co_filename, n) for f, n in traceback.walk_tb(exc.__traceback__)]
        fix = f"{exc}; fix the file"
        if isinstance(exc, SyntaxError):
            places.append((exc.filename or name, exc.lineno or 0))
            fix += " (a merge conflict left behind?)"
        elif isinstance(exc, SystemExit):
            fix = f"it called sys.exit({exc.code!r}): remove the exit"
        shown = [(_shown(file, root, ""), n) for file, n in places]
        where = next((f"{file}:{n}: " for file, n in reversed(shown) if file), "")
        raise GeneratorError(f"{where}cannot import the {what} module {name!r}: {fix}") from None
    if elsewhere := _outside(module, root):
        raise GeneratorError(
            f"the {what} module {name!r} was imported from {elsewhere}, not {root}: put the "
            "project first on the path"
        )
    return module


def _import(target: str, root: Path, what: str) -> tuple[ModuleType, Any]:
    module_name, _, attribute = target.partition(":")
    module = import_module(module_name, root, what)
    if not hasattr(module, attribute):
        raise GeneratorError(f"{module_name} has no {attribute!r}: fix `{what}` in [tool.specgen]")
    return module, getattr(module, attribute)


def load_format(config: Config) -> Format:
    """Import the project's format module and read the names the generator checks against."""
    module = import_module(config.format, config.root, "format")
    if missing := [name for name in FORMAT_NAMES if not hasattr(module, name)]:
        raise GeneratorError(f"the format module {config.format} has no {missing[0]}: restore it")
    roles = dict(module.GROUP_ROLES)
    if wrong := [(group, role) for group, role in roles.items() if role not in ROLES]:
        group, role = wrong[0]
        raise GeneratorError(f"{config.format}.GROUP_ROLES[{group!r}]: {role!r} is none of {ROLES}")
    groups = {name: tuple(found) for name, found in module.TABLE_GROUPS.items()}
    for table in config.tables:
        if table.name not in groups:
            raise GeneratorError(f"{config.format}: TABLE_GROUPS has no {table.name!r}: add it")
        if unknown := [g for g in groups[table.name] if g not in roles]:
            raise GeneratorError(f"{config.format}: group {unknown[0]!r} has no GROUP_ROLES line")
    return Format(
        groups=groups,
        roles=roles,
        module=module,
    )


def load_tables(config: Config) -> tuple[LoadedTable, ...]:
    """Import every configured table's rows, retired keys and the dataclass they describe."""
    loaded = []
    for table in config.tables:
        table_module, rows = _import(table.rows, config.root, "table")
        _, retired = _import(table.retired, config.root, "table")
        _, cls = _import(table.cls, config.root, "class")
        for setting, found in ((table.rows, rows), (table.retired, retired)):
            if not isinstance(found, (tuple, list)):
                raise GeneratorError(f"{setting} is a {type(found).__name__}, not a tuple")
        if not dataclasses.is_dataclass(cls):
            raise GeneratorError(f"{table.cls} must be a dataclass")
        digest = getattr(table_module, "table_digest", None)
        if not callable(digest):
            module = table_module.__name__
            raise GeneratorError(f"{module} has no table_digest(rows, retired): define it")
        cls_module = sys.modules[cls.__module__]  # its own names a field would hide
        shown = _shown(cls_module.__file__, config.root, cls_module.__name__)
        tree = ast.parse(Path(cls_module.__file__ or "").read_text(encoding="utf-8"))
        loaded.append(
            LoadedTable(
                config=table,
                bound=bound_names(tree, shown),
                rows=tuple(rows),
                retired=tuple(retired),
                fields={f.name: f for f in dataclasses.fields(cls)},
                module=table_module.__name__,
                source_file=_shown(table_module.__file__, config.root, table_module.__name__),
                digest=digest,
                cls=cls,
            )
        )
    return tuple(loaded)


def _row_label(table: str) -> str:
    return "table row" if table == "spec" else f"table {table!r} row"


def _check_shape(where: str, raw: Any, shape: dict[str, type], kind: str) -> None:
    """Refuse a row or retired key the checks (and table_digest, a dataclass's) cannot read."""
    wrong = [name for name, of in shape.items() if not isinstance(getattr(raw, name, None), of)]
    if not wrong and not all(isinstance(alias, str) for alias in getattr(raw, "aliases", ())):
        wrong = ["aliases"]
    if wrong or not dataclasses.is_dataclass(raw):
        what = f"{', '.join(wrong)} missing or of another type" if wrong else "not a dataclass"
        raise GeneratorError(f"{where}: {what}; every entry must be a {kind}")


def _name_problems(row: Any, table: LoadedTable, role: str | None) -> list[str]:
    rename = "\n  Rename the field (and its row)."
    if not row.name.isidentifier() or keyword.iskeyword(row.name):
        return ["name is not a Python identifier.\n  Use the dataclass field's name."]
    if row.name.startswith("__"):
        return [f"name {_DUNDER}.{rename}"]
    if role == DERIVED and row.name in table.fields:
        return [f"{row.group} rows name no field, but {row.name!r} is one.\n  Rename the row."]
    if role == DERIVED:
        return []
    if row.name in table.bound:
        return [
            f"name {row.name!r} shadows a name the class's module binds "
            f"({table.bound[row.name]}).{rename}"
        ]
    if row.name not in table.fields:
        return [
            f"the {table.config.name} class has no field {row.name!r}.\n  Add it or remove the row."
        ]
    if row.name in table.config.filled_elsewhere:
        return [f"field {row.name!r} has a row and is in filled_elsewhere.\n  Remove one of them."]
    if role == CROSSES and row.name in {r.within for r in table.rows if r.key}:
        return [f"field {row.name!r} is also an object other rows nest keys in.{rename}"]
    return []


def _key_problems(row: Any, table: LoadedTable, form: Format) -> list[str]:
    """A top-level key (a CodegenMeta field, one level nested at most) and its aliases."""
    sep = form.module.NESTING_SEPARATOR
    for key in (row.key, *row.aliases):
        parts = key.split(sep)
        if len(parts) > 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            return [f"key {key!r} is no identifier, nor two joined by {sep!r}.\n  Choose another."]
        if parts[0].startswith("__"):  # the top-level name; a nested key is a dict's key
            return [f"key {key!r} names a field of CodegenMeta and {_DUNDER}.\n  Choose another."]
    problems = []
    reserved = form.module.RESERVED_KEYS.get(row.group, {})
    if row.within in reserved:
        problems.append(
            f"key {row.key!r} nests in {row.within!r}, which the artifact format reserves: "
            f"{reserved[row.within]}.\n  Choose another object, or a top-level key."
        )
    for alias, (within, _) in zip(row.aliases, row.alias_places, strict=True):
        if within != row.within:
            fix = f'"{row.within}{sep}<old name>"' if row.within else "it without a dot"
            problems.append(f"alias {alias!r} leaves the object of the key.\n  Write {fix}.")
    nests = {r.within: r for r in table.rows if r.key and r.within}
    if not row.within and (nested := nests.get(row.key)):
        problems.append(
            f"key {row.key!r} is also the object row {table.rows.index(nested) + 1} "
            f"({nested.name}) nests {nested.key!r} in.\n  Choose another key."
        )
    return problems


def _row_problems(row: Any, table: LoadedTable, form: Format, role: str | None) -> list[str]:
    problems = _name_problems(row, table, role)
    if row.doc.splitlines() not in ([], [row.doc]):  # any line boundary: \n, \r, \u2028 ...
        problems.append(f"doc {row.doc!r} has a line break.\n  Write the doc on one line.")
    if "\\|" in row.doc:  # fields.md escapes a plain |
        problems.append(f"doc {row.doc!r} has a backslash before a pipe.\n  Write a plain |.")
    groups = form.groups[table.config.name]
    if role is None:
        close = [f" Did you mean {g!r}?" for g in difflib.get_close_matches(row.group, groups, 1)]
        known = f"Known groups: {', '.join(groups)}.{''.join(close)}"
        return [*problems, f"unknown group {row.group!r}.\n  {known}"]
    if role in (EXEMPT, OTHERS):
        if found := [n for n in _ROW if n not in ("name", "group", "doc") and getattr(row, n)]:
            problems.append(
                f"a row of group {row.group!r} has no key of its own.\n  Clear "
                f"{', '.join(found)}, or move the row to a group with keys."
            )
    elif not row.key:
        problems.append(f"a {row.group} row needs the key it is frozen under.\n  Set key=...")
    elif row.group in form.module.TOP_LEVEL_GROUPS:
        problems += _key_problems(row, table, form)
    if role != EXEMPT and not row.doc.strip():
        problems.append('a row that crosses the artifact needs a one-line doc.\n  Set doc="...".')
    field = table.fields.get(row.name) if role == CROSSES else None
    if field is not None and row.post_init == field.init:  # post_init: set after construction
        problems.append(
            f"post_init={row.post_init} but the dataclass field has init={field.init}.\n  "
            f"Set post_init={not row.post_init}, or field(init={row.post_init}) in the class."
        )
    return problems


def _retired_problems(gone: Any, table: LoadedTable, form: Format) -> list[str]:
    problems = []
    nests = {r.within for r in table.rows if r.key and r.within}
    if gone.within and gone.within not in nests:
        problems.append(
            f"no row's key nests in {gone.within!r}, so the retirement would drop nothing.\n"
            f"  Retire {gone.within!r} itself, or a key a row nests in it."
        )
    elif gone.group in form.module.TOP_LEVEL_GROUPS and gone.key in nests:
        problems.append(
            f"rows nest their keys in {gone.key!r}, which freeze still writes.\n"
            "  Retire the nested keys that are gone, not the object."
        )
    groups = [g for g in form.groups[table.config.name] if g in form.module.RETIRABLE_GROUPS]
    if gone.group not in groups:
        problems.append(
            f"group must be one of {', '.join(map(repr, groups))}, where the key was written, "
            f"not {gone.group!r}."
        )
    if not gone.key or not gone.reason.strip():
        problems.append("a retired key needs its key and a reason.")
    return problems


def _claim_problems(table: LoadedTable, form: Format, label: str, retired: str) -> list[str]:
    """One row a name, one holder a key (a row's, an alias, a retired one), none reserved."""
    problems = []
    rows = list(enumerate(table.rows, start=1))
    first: dict[str, int] = {}
    for number, row in rows:
        if first.setdefault(row.name, number) != number:
            problems.append(
                f"{label} {number} ({row.name}): name {row.name!r} already has row "
                f"{first[row.name]}.\n  Remove one of them."
            )
    claims = [(f"{label} {n} ({row.name})", row.key, row.group) for n, row in rows if row.key]
    claims += [
        (f"{label} {n} ({row.name}) alias", alias, row.group)
        for n, row in rows
        for alias in row.aliases
    ]
    claims += [
        (f"{retired}[{index}] ({gone.key})", gone.key, gone.group)
        for index, gone in enumerate(table.retired)
        if gone.key and gone.reason.strip()
    ]
    owner: dict[str, str] = {}
    for where, key, group in claims:
        if not key:
            problems.append(f"{where}: the alias is empty.\n  Write the older key, or remove it.")
        elif key in form.module.RESERVED_KEYS.get(group, {}):
            problems.append(
                f"{where}: key {key!r} is reserved by the artifact format in {group}: "
                f"{form.module.RESERVED_KEYS[group][key]}.\n  Choose another key."
            )
        elif key in owner:
            problems.append(
                f"{where}: key {key!r} is already used by {owner[key]}.\n  Choose another key, "
                "or drop the alias or retirement."
            )
        else:
            owner[key] = where
    return problems


def _coverage_problems(loaded: LoadedTable, form: Format) -> list[str]:
    """One others row at most, and one row (or filled_elsewhere) each field of the class."""
    problems = []
    others = sum(form.roles.get(row.group) == OTHERS for row in loaded.rows)
    if others > 1:
        problems.append(f"table {loaded.config.name!r}: {others} rows of role others.\n  Keep one.")
    named = {row.name for row in loaded.rows}
    for field_name in loaded.fields:
        if field_name not in named and field_name not in loaded.config.filled_elsewhere:
            problems.append(
                f"field {field_name!r} of {loaded.config.cls} has no table row.\n"
                f"  Add a SpecField row for it to {loaded.source_file} (group 'exempt' if it "
                "never crosses the artifact)."
            )
    for field_name in loaded.config.filled_elsewhere:
        if field_name not in loaded.fields:
            problems.append(
                f"{loaded.config.setting}: filled_elsewhere names {field_name!r}, not a field of "
                f"{loaded.config.cls}.\n  Remove it."
            )
    return problems


def validate(loaded: LoadedTable, kinds: KindFacts, form: Format) -> Table:
    """Check every row against the class, the format and the kinds; one error, every problem."""
    name = loaded.config.name
    label = _row_label(name)
    retired = loaded.config.retired.partition(":")[2]
    for number, raw in enumerate(loaded.rows, start=1):
        _check_shape(f"{label} {number}", raw, _ROW, "SpecField")
    for index, raw in enumerate(loaded.retired):
        _check_shape(f"{retired}[{index}]", raw, _RETIRED, "RetiredKey")
    try:  # each field's annotation, resolved once a table (none without the class)
        hints = {} if loaded.cls is None else kinds.field_types(loaded.cls)
    except Exception as exc:  # the class is user code: report, never traceback
        raise GeneratorError(
            f"{loaded.config.cls}: cannot resolve the fields' annotations ({exc}): annotate "
            "each field with a type its module names"
        ) from None
    problems: list[str] = []
    crossings: dict[str, Crossing] = {}
    for number, row in enumerate(loaded.rows, start=1):
        role = form.roles.get(row.group) if row.group in form.groups[name] else None
        found = _row_problems(row, loaded, form, role)
        field = loaded.fields.get(row.name) if role == CROSSES else None
        try:  # a keyed row's crossing, by the kinds, from its field; what their laws refuse
            if role in (CROSSES, DERIVED):
                crossing = crossings[row.name] = kinds.resolve(row, field, hints.get(row.name, Any))
                if field is not None and (crossing.broken_law or crossing.broken_type):
                    found.append(kinds.law_problem(row, field, crossing))
        except kinds.error as exc:
            found.append(str(exc))
        problems += [f"{label} {number} ({row.name}): {p}" for p in found]
    for index, gone in enumerate(loaded.retired):
        found = _retired_problems(gone, loaded, form)
        problems += [f"{retired}[{index}] ({gone.key}): {p}" for p in found]
    problems += _claim_problems(loaded, form, label, retired) + _coverage_problems(loaded, form)
    if problems:
        raise GeneratorError("\n".join(problems))
    return Table(
        name=name,
        rows=loaded.rows,
        retired=loaded.retired,
        roles={g: form.roles[g] for g in form.groups[name]},
        top_level_groups=tuple(form.module.TOP_LEVEL_GROUPS),
        module=loaded.module,
        source_file=loaded.source_file,
        digest=loaded.digest(loaded.rows, loaded.retired),
        cls=loaded.config.cls,
        crossings=crossings,
        init_fields=tuple(name for name, field in loaded.fields.items() if field.init),
    )
