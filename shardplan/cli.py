"""``shardplan`` (also ``python -m shardplan``): read, compare and picture artifacts, and
run the demo.

``show`` and ``diff`` read codegen_meta.json with ``load_meta`` and import no torch; only
``demo`` does. Exit statuses: 0 ok (``diff``: the same plan), 1 the plans differ, 2 bad
input, with one line naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from shardplan.collector import pause_collector, resume_collector
from shardplan.errors import ArtifactWriteError, MetaError

if TYPE_CHECKING:
    from shardplan.review.view import PlanView

PROG = "shardplan"


class ExitStatus(IntEnum):
    """What ``shardplan`` exits with."""

    OK = 0
    DIFFERENT = 1
    BAD_INPUT = 2


class BadInput(Exception):
    """One line for the user, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line naming the fix, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise BadInput(f"{message} (see `{self.prog} --help`)")


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Read, compare and picture codegen_meta.json artifacts; run the demo.",
        epilog="exit status: 0 ok (diff: the same plan), 1 the plans differ, 2 bad input. "
        "`shardplan demo --help`: the demo's options.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    show = commands.add_parser(
        "show",
        help="print the plan: the mesh axes, then one sorted line per module and field",
        description="Print the plan as sorted lines: the mesh axes, the plan-level keys, the "
        "keys no row owns, then one line per module and field, placements as `tp=S(0)`. "
        "Works as a git textconv.",
    )
    show.add_argument("file", type=Path, metavar="FILE", help="a codegen_meta.json")
    show.add_argument(
        "--collapse",
        action="store_true",
        help="fold modules that differ only by a layer number: model.layers.[0-31].mlp",
    )
    show.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="write a self-contained page to OUT instead: modules by mesh axes, placements as "
        "colours, alike layers folded",
    )
    diff = commands.add_parser(
        "diff",
        help="print what changed in the plan between two artifacts, by meaning",
        description="Print one line per change between two artifacts: a module added or "
        "removed, a placement, field or rule added, removed or changed, a plan-level key "
        "changed. Key order, indentation, rule order and the keys no row owns are no "
        "change; a note says when they differ. Exit 0 the same plan, 1 different, 2 bad "
        "input.",
    )
    diff.add_argument("old", type=Path, metavar="OLD", help="the artifact before")
    diff.add_argument("new", type=Path, metavar="NEW", help="the artifact after")
    diff.add_argument(
        "--collapse", action="store_true", help="fold the same change across layers into one"
    )
    diff.add_argument("--json", action="store_true", help="print the changes as JSON, for tools")
    commands.add_parser(
        "demo",
        help="the end-to-end demo on real torch (same as shardplan-demo)",
        add_help=False,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    if args_list[:1] == ["demo"]:
        from shardplan.examples import demo  # torch, only here

        return demo.main(args_list[1:], prog=f"{PROG} demo")
    # A command reads a whole artifact and keeps all of it: no collection would free
    # anything, and each would walk it (shardplan.collector).
    paused = pause_collector()
    try:
        args = _parser().parse_args(args_list)
        if args.command is None:
            raise BadInput(f"a command is needed: show, diff or demo (see `{PROG} --help`)")
        if args.command == "show":
            return _show(args, sys.stdout)
        return _diff(args, sys.stdout)
    except BadInput as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return ExitStatus.BAD_INPUT
    finally:
        resume_collector(paused)


def _read(path: Path) -> PlanView:
    from shardplan.review.view import read_view

    try:
        return read_view(path)
    except MetaError as exc:
        raise BadInput(_one_line(exc, path)) from None


def _one_line(error: MetaError, path: Path) -> str:
    """The error as one line that names the file."""
    text = " ".join(str(error).split())
    return text if str(path) in text else f"{path}: {text}"


def _show(args: argparse.Namespace, out: TextIO) -> int:
    from shardplan.review.view import show_parts

    view = _read(args.file)
    if args.html is not None:
        from shardplan.review import page  # the page's writer, only for a page

        if args.html.is_dir():
            raise BadInput(f"--html {args.html}: a folder; name the page's file")
        _refuse_artifact_as_page(args.file, args.html)
        try:
            groups = page.write_page(view, args.html)
        except ArtifactWriteError as exc:
            raise BadInput(f"--html: {exc}") from None
        print(f"wrote {args.html}: {groups:,} module groups", file=out)
        return ExitStatus.OK
    _write(out, show_parts(view, collapse=args.collapse))
    return ExitStatus.OK


def _refuse_artifact_as_page(file: Path, html: Path) -> None:
    """Refuse a page path that is the artifact itself, or a file holding JSON (an artifact,
    by its first byte): writing the page would replace it."""
    try:
        if html.exists() and html.samefile(file):
            raise BadInput(f"--html {html}: that is the artifact itself; name another file")
        with html.open("rb") as existing:
            head = existing.read(4096).lstrip()
    except OSError:
        return  # no such file (the page is new), or one the writer will name
    if head.startswith(b"{"):
        raise BadInput(
            f"--html {html}: it holds JSON (an artifact?), which the page would replace; "
            "name another file"
        )


def _diff(args: argparse.Namespace, out: TextIO) -> int:
    from shardplan.review.diff import change_lines, compare
    from shardplan.review.fold import fold
    from shardplan.review.pair import UnreadFile, read_pair

    try:
        old, new = read_pair(args.old, args.new)
    except UnreadFile as exc:
        raise BadInput(_one_line(exc.error, exc.path)) from None
    comparison = compare(old, new, same_bytes=_same_bytes(args.old, args.new))
    status = ExitStatus.DIFFERENT if comparison.changes else ExitStatus.OK
    if args.json:
        changes = [c.as_json() for c in comparison.changes]
        if args.collapse:
            rests = [("", c.pop("module") or "", json.dumps(c, sort_keys=True)) for c in changes]
            changes = [{"module": name, **json.loads(rest)} for _, name, rest in fold(rests)]
        document = {
            "old": str(args.old),
            "new": str(args.new),
            "same_plan": status == ExitStatus.OK,
            "changes": changes,
            "notes": comparison.notes,
        }
        _write(out, [json.dumps(document, indent=2, ensure_ascii=False) + "\n"])
        return status
    lines = change_lines(comparison, collapse=args.collapse)
    if status == ExitStatus.OK:
        lines.append(f"same plan: {'; '.join(comparison.notes)}")
    else:
        count = len(comparison.changes)
        summary = f"{count} change{'s' if count != 1 else ''}"
        lines.append(
            f"{summary}; also: {'; '.join(comparison.notes)}" if comparison.notes else summary
        )
    _write(out, ["".join(line + "\n" for line in lines)])
    return status


def _same_bytes(old: Path, new: Path) -> bool:
    """Whether the two files hold the same bytes (both were just read whole)."""
    try:
        return old.stat().st_size == new.stat().st_size and old.read_bytes() == new.read_bytes()
    except OSError:
        return False


def _write(out: TextIO, parts: Iterable[str]) -> None:
    """Write the text's parts as they are, one after the other (no copy of a large plan's
    text); a reader that went away (``| head``) is no error."""
    try:
        for part in parts:
            out.write(part)
        out.flush()
    except BrokenPipeError:
        pass  # run() ends the process without flushing into the closed pipe again


def run() -> NoReturn:
    """The console script: exit with ``main``'s status. The interpreter's teardown would
    free a large plan object by object (a fifth of a second at 100k modules) after the
    output is complete: the process ends once its output is flushed instead."""
    status = main()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass
    os._exit(status)
