"""Fail when the built docs show raw reStructuredText: a role (`:class:`...) or a literal
block marker (`Example::`) in a page means a docstring the renderer (mkdocstrings, Google
style, Markdown) cannot read. Run after `mkdocs build`: `python scripts/check_docs.py [SITE]`."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

RAW = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(?=\s*`?\S)"
                 r"|\b\w+::(?:\s|$)")
TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S)


def raw_rst(page: str) -> list[str]:
    """The snippets of ``page`` (HTML) whose visible text holds raw reStructuredText."""
    text = html.unescape(TAG.sub(" ", page))
    return [text[max(0, m.start() - 40):m.end() + 40].replace("\n", " ").strip()
            for m in RAW.finditer(text)]


def main(site: str = "build/site") -> int:
    found = [(path, snippet) for path in sorted(Path(site).rglob("*.html"))
             for snippet in raw_rst(path.read_text(encoding="utf-8"))]
    for path, snippet in found[:20]:
        print(f"{path}: raw reStructuredText: ...{snippet}...", file=sys.stderr)
    if found:
        print(f"check_docs: {len(found)} piece(s) of raw reStructuredText in {site}; write "
              "docstrings in Google style with Markdown (`Name`, ```python fences)",
              file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
