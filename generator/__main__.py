"""The command line: ``specgen`` / ``python -m generator``.

Exit status: 0 done (or no drift), 1 drift found by --check, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generator.config import find_root, load_config
from generator.emit import FIX_COMMAND, compare, write
from generator.errors import GeneratorError
from generator.pipeline import generate, load_validated_table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specgen",
        description="Render generated/ from the field table and templates/ (see [tool.specgen]).",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="generate",
        choices=("generate", "table", "demo"),
        help="generate (default): write generated/; table: print the field table; "
        "demo: shard an example model on two CPU processes from a frozen plan (specgen demo --help)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on drift, with a diff"
    )
    mode.add_argument("--diff", action="store_true", help="write nothing; print the diff only")
    parser.add_argument(
        "--root", type=Path, help="project folder (default: found from the current one)"
    )
    return parser


def format_table(config_root: Path) -> str:
    """The field table as an aligned text table."""
    table = load_validated_table(load_config(config_root))
    header = ("#", "name", "key", "group", "freeze", "rebuild", "post_init")
    rows = [header] + [
        (str(r.number), r.name, r.key, r.group, r.freeze, r.rebuild, "yes" if r.post_init else "")
        for r in table.rows
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + f"\n\ntable sha256: {table.digest}\n"


def run(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:
        # The demo needs torch; imported only here so the generator itself never is.
        from shardplan.demo import main as demo

        return demo(argv[1:])
    args = _parser().parse_args(argv)
    try:
        root = (args.root or find_root(Path.cwd())).resolve()
        if args.command == "table":
            sys.stdout.write(format_table(root))
            return 0
        config = load_config(root)
        expected = generate(config)
        if args.check or args.diff:
            drift = compare(config, expected)
            sys.stdout.write(drift.diff)
            if args.check and drift:
                print(drift.report(config), file=sys.stderr)
                return 1
            return 0
        changed = write(config, expected)
        for name in changed:
            print(f"specgen: wrote {config.output_name}/{name}")
        if not changed:
            print(f"specgen: {config.output_name}/ is up to date")
        return 0
    except GeneratorError as exc:
        print(f"specgen: {exc}", file=sys.stderr)
        return 2


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())


if __name__ == "__main__":
    main()
