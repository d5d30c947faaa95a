"""``python -m e2e.doclint``: the README and docs render as written, and their links lead somewhere.

``make lint`` runs it over ``README.md`` and ``docs/**/*.md``.  The documents are parsed as CommonMark
(markdown-it-py, the parser behind MyST and mdformat; GitHub's renderer is CommonMark too), so what
is checked is what a reader sees, not what a line-based regex guesses:

* **Fences.**  A stray fence turns every following section into one code block; nothing looks
  wrong in an editor.  Two rules catch it: a fenced block must be closed before the document ends,
  and every opening fence names its language (````` ```text ````` for plain output).  With the second
  rule a closing fence that was meant to open a block shows up as a block without a language, and
  an opening fence inside a block as a block whose content holds a fence line with a language.
* **Relative links and images** must name a file or directory of the repository, and an anchor
  (``file.md#section``, ``#section``) must be a heading of that document, slugged as GitHub does,
  or an HTML ``id``/``name`` in it.  Absolute URLs are not fetched: lint runs without a network.

Why not markdownlint or lychee: both need Node or a Rust toolchain on every machine that lints, and
neither knows GitHub's heading slugs without plugins; this is one small module on a parser the dev
environment already has.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    """One finding, printed as ``path:line: message`` so editors jump to it."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        try:
            shown = self.path.relative_to(ROOT)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.message}"


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])  # GitHub's additions


def _walk(tokens: Iterable[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if char in " -_" or category[0] in "LMN":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def _plain(inline: Token) -> str:
    """The text a heading shows: text and code spans, without markup."""
    return "".join(t.content for t in _walk(inline.children or []) if t.type in ("text", "code_inline"))


def anchors(source: str) -> set[str]:
    """Every anchor a document offers: its headings' slugs (``-1``, ``-2`` for repeats) and HTML ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    tokens = _parser().parse(source)
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            base = slug(_plain(tokens[i + 1]))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(m.group(1) for m in _HTML_ANCHOR.finditer(source))
    return found


def _fence_problems(path: Path, tokens: Sequence[Token], lines: Sequence[str]) -> list[Problem]:
    problems = []
    for token in tokens:
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        opened = start + 1
        if not token.info.strip():
            problems.append(
                Problem(
                    path,
                    opened,
                    "a fenced block without a language: name it (```text for plain output); if this "
                    "fence was meant to close the block above, that block is not closed where you think",
                )
            )
        closing = lines[end - 1] if end - 1 > start and end - 1 < len(lines) else ""
        match = _FENCE_LINE.match(closing.rstrip("\n"))
        closed = (
            match is not None
            and match.group(1)[0] == token.markup[0]
            and len(match.group(1)) >= len(token.markup)
            and not match.group(2).strip()
        )
        if not closed:
            problems.append(Problem(path, opened, f"the fence {token.markup} opened here is never closed"))
        for offset, line in enumerate(token.content.splitlines()):
            inner = _FENCE_LINE.match(line)
            if inner and inner.group(1)[0] == token.markup[0] and inner.group(2).strip():
                problems.append(
                    Problem(
                        path,
                        opened + 1 + offset,
                        f"a fence with a language inside the block opened at line {opened}: "
                        "a fence above is missing or stray",
                    )
                )
    return problems


def _link_problems(
    path: Path, tokens: Sequence[Token], source: str, anchor_cache: dict[Path, set[str]]
) -> list[Problem]:
    problems = []
    line = 0
    for token in tokens:
        if token.map is not None:
            line = token.map[0] + 1
        for inner in _walk(token.children or []):
            if inner.type == "link_open":
                target = str(inner.attrs.get("href", ""))
            elif inner.type == "image":
                target = str(inner.attrs.get("src", ""))
            else:
                continue
            problem = _check_target(path, source, target, anchor_cache)
            if problem:
                problems.append(Problem(path, line, problem))
    return problems


def _check_target(path: Path, source: str, target: str, anchor_cache: dict[Path, set[str]]) -> str | None:
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target:
        return None
    file = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
    if parts.path:
        if not file.exists():
            return f"link to {target!r}: {parts.path} does not exist"
        try:
            file.relative_to(ROOT)
        except ValueError:
            return f"link to {target!r} leaves the repository"
    if not parts.fragment:
        return None
    if file.suffix != ".md" or file.is_dir():
        return None  # GitHub's line anchors (#L10) and the like: not checked
    if file not in anchor_cache:
        anchor_cache[file] = anchors(source if file == path else file.read_text(encoding="utf-8"))
    fragment = unquote(parts.fragment)
    if fragment not in anchor_cache[file]:
        return f"link to {target!r}: no heading or anchor {fragment!r} in {file.name}"
    return None


def check(paths: Iterable[Path]) -> list[Problem]:
    """Every problem in these Markdown files, in file and line order."""
    problems: list[Problem] = []
    anchor_cache: dict[Path, set[str]] = {}
    for path in paths:
        path = path.resolve()
        source = path.read_text(encoding="utf-8")
        tokens = _parser().parse(source)
        lines = source.splitlines()
        problems += _fence_problems(path, tokens, lines)
        problems += _link_problems(path, tokens, source, anchor_cache)
    return sorted(problems, key=lambda p: (str(p.path), p.line))


def default_paths() -> list[Path]:
    """What ``make lint`` checks: the README and every document under docs/."""
    return [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: Sequence[str] | None = None) -> int:
    """Print each problem as ``file:line: message``; exit 1 when there is any."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print("usage: python -m e2e.doclint [FILE.md ...]   (default: README.md and docs/**/*.md)")
        print("Checks that fences close and name a language, and that relative links and anchors resolve.")
        return 0
    paths = [Path(a) for a in args] or default_paths()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such Markdown file: {', '.join(missing)}", file=sys.stderr)
        return 2
    problems = check(paths)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in the documentation", file=sys.stderr)
        return 1
    print(f"documentation: {len(paths)} file(s), fences and links fine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
