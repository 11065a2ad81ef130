"""The code blocks of a Markdown page, with the ``<!-- docs-test: ... -->`` comment that
says how a block is meant (tests/test_docs.py runs them; tests/additions.py follows the
README's fragments as a user would)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Block:
    """One fenced block of ``page``."""

    page: Path
    line: int  # of the opening fence
    language: str
    code: str
    marker: str  # the docs-test comment before it, or ""

    def where(self) -> str:
        """``page:line``, relative to the repository when the page is in it."""
        root = Path(__file__).resolve().parents[1]
        page = self.page.relative_to(root) if self.page.is_relative_to(root) else self.page
        return f"{page.as_posix()}:{self.line}"


def blocks(page: Path, text: str | None = None) -> Iterator[Block]:
    """The fenced blocks of ``page`` (or of ``text``, read from it), in order."""
    text = page.read_text() if text is None else text
    fence = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.S | re.M)
    for match in fence.finditer(text):
        before = text[: match.start()].rstrip()
        marker = re.search(r"<!-- docs-test: ((?:(?!-->).)*?) ?-->$", before, re.S)
        yield Block(
            page,
            text.count("\n", 0, match.start()) + 1,
            match[2],
            textwrap.dedent(match[3]),
            " ".join(marker[1].split()) if marker else "",
        )


def section_blocks(page: Path, heading: str) -> list[Block]:
    """The blocks under the ``## heading`` of ``page``, up to the next heading of its level."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return [
        block
        for block in blocks(page, text)
        if start < _offset(text, block.line) < (len(text) if end < 0 else end)
    ]


def _offset(text: str, line: int) -> int:
    """The character offset of 1-based ``line`` in ``text``."""
    return len("".join(text.splitlines(keepends=True)[: line - 1]))
