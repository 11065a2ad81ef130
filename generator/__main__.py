"""The command line: ``specgen`` / ``python -m generator`` (docs/cli.md). Jinja2 and black
(the ``codegen`` extra) are imported when a command runs: ``--help`` needs neither."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from enum import IntEnum
from pathlib import Path

from . import __version__
from .config import find_root, load_config
from .errors import GeneratorError

COMMANDS = {
    "generate": "write the changed files of generated/, all or nothing (the default)",
    "check": "write nothing; exit 1 on drift, with a unified diff and the fix",
    "diff": "write nothing; print the unified diff only",
    "table": "print the field tables as text tables, with their digests",
}
GENERATE_ONLY = ("--allow-breaking", "--new-lock")  # options that only writing means
# Those, and the old spellings of `check` and `diff` (kept for existing CI steps and hooks),
# are accepted by every command only to refuse, in words, a combination that means nothing.
FLAGS = {
    "--allow-breaking": "accept a table edit that breaks existing artifacts; record it in the lock",
    "--new-lock": "replace an unusable table lock, merging both sides of a conflict",
    "--check": "same as `specgen check`",
    "--diff": "same as `specgen diff`",
}


class ExitStatus(IntEnum):
    """What specgen's exit status means."""

    OK = 0  # done; for check: generated/ matches the table and templates
    DRIFT = 1  # check found generated/ differs from what the table and templates give
    BAD_INPUT = 2  # bad table, template, configuration or command line; nothing written


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specgen",
        description="Render generated/ from the field table and templates/ (see [tool.specgen]).",
        epilog="exit status: 0 ok, 1 drift (check), 2 bad input or usage",
    )
    parser.add_argument("--root", type=Path, help="project folder (default: found from the cwd)")
    alias = parser.add_mutually_exclusive_group()
    for flag in ("--check", "--diff"):
        alias.add_argument(flag, action="store_true", help=FLAGS[flag])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        command = commands.add_parser(name, help=help_text, description=help_text)
        # SUPPRESS: an option given before the command is not reset by the subparser.
        command.add_argument("--root", type=Path, default=argparse.SUPPRESS, help="project folder")
        for flag, flag_help in FLAGS.items():
            shown = flag_help if name == "generate" and flag in GENERATE_ONLY else argparse.SUPPRESS
            command.add_argument(flag, action="store_true", default=argparse.SUPPRESS, help=shown)
    return parser


def _command(args: argparse.Namespace) -> str:
    """The command to run, refusing combinations that mean nothing."""
    given = [flag for flag in FLAGS if getattr(args, flag[2:].replace("-", "_"), False)]
    if args.command is None:
        return "check" if args.check else "diff" if args.diff else "generate"
    for flag in given:
        if flag not in GENERATE_ONLY or args.command != "generate":
            meant = f"generate {flag}" if flag in GENERATE_ONLY else flag[2:]
            raise GeneratorError(
                f"`specgen {args.command} {flag}` means nothing: run `specgen {args.command}` "
                f"or `specgen {meant}`"
            )
    return str(args.command)


def format_table(config_root: Path) -> str:
    """Every field table as an aligned text table, with its digest."""
    from .pipeline import load_validated_tables  # run() checked the codegen extra

    out = []
    for table in load_validated_tables(load_config(config_root)):
        rows = [("#", "name", "key", "group", "freeze", "rebuild", "post_init")] + [
            (str(n), r.name, r.key, r.group, r.freeze, r.rebuild, "yes" if r.post_init else "")
            for n, r in enumerate(table.rows, start=1)
        ]
        widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
        rows.insert(1, tuple("-" * width for width in widths))
        lines = ["  ".join(map(str.ljust, row, widths)).rstrip() for row in rows]
        title = f"{table.name} table ({table.source_file}, {table.cls.partition(':')[2]})"
        out.append(f"{title}\n\n" + "\n".join(lines) + f"\n\ntable sha256: {table.digest}\n")
    return "\n".join(out)


def _run_command(command: str, root: Path, allow_breaking: bool, new_lock: bool) -> ExitStatus:
    from .emit import compare, write  # run() checked the codegen extra
    from .evolution import LockMode
    from .pipeline import generate

    config = load_config(root)
    generated = generate(config, mode=LockMode.from_command(command, allow_breaking, new_lock))
    for note in generated.notes:
        print(note)
    if generated.changes:  # what the table edit does to artifacts, before the files it changes
        print(f"specgen: the table changed since last generated:\n{generated.changes.report()}")
    # The outputs depend on the generator's version as well as on root's tables: where they
    # differ from what is on disk, say whose generator rendered them.
    own = Path(__file__).resolve().parent.parent
    whose = own != root and (
        f"specgen: rendered by the generator of {own} (specgen {__version__}), not {root}'s own"
    )
    if command in ("check", "diff"):
        drift = compare(config, generated.files)
        sys.stdout.write(drift.diff)
        if command == "check" and drift:
            print(drift.report(config, bool(generated.changes.breaking)), file=sys.stderr)
            if whose:
                print(whose, file=sys.stderr)
            return ExitStatus.DRIFT
        return ExitStatus.OK
    done = write(config, generated.files)
    out = config.output_name
    if done and whose:
        print(whose)
    for name, _, new in done:
        removed = " (generated, but no longer a declared output)" if new is None else ""
        print(f"specgen: {'removed' if removed else 'wrote'} {out}/{name}{removed}")
    if not done:
        print(f"specgen: {out}/ is up to date")
    return ExitStatus.OK


def run(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (an ExitStatus)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error it printed (2)
        return ExitStatus.OK if exc.code == 0 else ExitStatus.BAD_INPUT
    try:
        command = _command(args)
        # Before the project is looked for: what to install first. Found, not imported: a
        # check whose every source is cached never imports black.
        if missing := [name for name in ("black", "jinja2") if not importlib.util.find_spec(name)]:
            raise GeneratorError(
                f"{command} needs the codegen extra ({missing[0]} is not installed): "
                "pip install 'specgen[codegen]'"
            )
        root = (args.root or find_root(Path.cwd())).resolve()
        if command == "table":
            sys.stdout.write(format_table(root))
            return ExitStatus.OK
        flags = (getattr(args, "allow_breaking", False), getattr(args, "new_lock", False))
        return _run_command(command, root, *flags)
    except GeneratorError as exc:
        print(f"specgen: {exc}", file=sys.stderr)
        return ExitStatus.BAD_INPUT


def main() -> None:
    """Console-script entry point: ``run()`` supervised (a module ending the process: exit 2)."""
    from .supervise import supervised

    sys.exit(supervised(run, bad_input=ExitStatus.BAD_INPUT))


if __name__ == "__main__":
    main()
