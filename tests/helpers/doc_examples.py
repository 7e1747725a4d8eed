"""The fenced code blocks of the documentation, as the tests run them.

A page's `python` blocks run in order in one namespace (a later block may use what an earlier one
defined), its `console` blocks as shell sessions (each `$ ` line a command; the lines after it are
its output, not checked). A block preceded by `<!-- not-run: REASON -->` is one the tests would
not run: they fail on it, naming it and its reason (every example runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: The block kinds the tests run; the others (sh, json, sql, text, ...) are recipes, data or output.
RUN = ("python", "console")

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^\n`]*)$")
_MARK = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str          # the file, relative to the repository
    line: int          # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of the site."""
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m.group("indent")), m.group("fence")
        lang = (m.group("info").strip().split() or [""])[0]
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = _MARK.match(lines[j]) if j >= 0 else None
        out.append(Block(str(path.relative_to(ROOT)), start + 1, lang, "\n".join(body) + "\n",
                         mark.group("reason") if mark else None))
        i += 1
    return out


def commands(block: Block) -> list[str]:
    """The commands of a console block: each `$ ` line, with its `\\` continuations."""
    out: list[str] = []
    current: str | None = None
    for line in block.code.splitlines():
        if current is not None:
            current += "\n" + line
        elif line.startswith("$ "):
            current = line[2:]
        else:
            continue
        if not current.endswith("\\"):
            out.append(current)
            current = None
    return out
