"""A text cut into sentences, and their translations put back together with its layout.

Models here are trained on single sentences, so a text is cut first: paragraphs at blank
lines, then sentences by `sentencex` (Wikimedia's rule-based splitter); `Sentences.join` puts
the translations back with the text's own breaks. `per_sentence` runs a batch function over
the sentences of many texts at once (docs/concepts.md, "Data")."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")


@dataclass(frozen=True)
class Sentences:
    """A text's ``sentences`` (stripped; none for a blank text) and the ``len - 1`` ``breaks``
    between them: ``" "``, ``"\\n"`` (a line break) or ``"\\n\\n"`` (a new paragraph)."""

    sentences: list[str]
    breaks: list[str]

    def join(self, parts: Sequence[str]) -> str:
        """One output per sentence, joined by the text's breaks (else ValueError)."""
        if len(parts) != len(self.sentences):
            raise ValueError(f"{len(parts)} parts for {len(self.sentences)} sentences")
        return "".join(gap + part for gap, part in zip(["", *self.breaks], parts, strict=False))


def split_sentences(text: str, language: str = "en") -> Sentences:
    """Cut ``text`` into sentences; ``language``: an ISO 639 code the splitter knows."""
    from sentencex import segment

    sentences, breaks = [], []
    for p, paragraph in enumerate(_PARAGRAPH.split(text.strip())):
        gap = "\n\n" if p else ""
        for piece in segment(language, paragraph):
            core = piece.strip()
            if not core:   # a break the splitter kept as its own segment
                gap += piece
                continue
            if sentences:
                gap += piece[:len(piece) - len(piece.lstrip())]
                newlines = gap.count("\n")  # what a reader sees of the whitespace between
                breaks.append("\n\n" if newlines >= 2 else "\n" if newlines else " ")
            sentences.append(core)
            gap = piece[len(piece.rstrip()):]
    return Sentences(sentences, breaks)


def readable_sentences(text: str, language: str,
                       readable: Callable[[str], bool]) -> Sentences | None:
    """``text``'s sentences for which ``readable`` holds (those holding a token the model
    reads), or None when fewer than two are: the text is then one sentence to the model.
    A dropped sentence's break goes with the kept one after it: the wider of the two."""
    found = split_sentences(text, language)
    if len(found.sentences) < 2:
        return None
    keep = [k for k, s in enumerate(found.sentences) if readable(s)]
    if len(keep) < 2:
        return None
    breaks = [max(found.breaks[a:b], key=len) for a, b in zip(keep, keep[1:], strict=False)]
    return Sentences([found.sentences[k] for k in keep], breaks)


def per_sentence(texts: Sequence[str], cuts: Sequence[Sentences | None],
                 run: Callable[[list[str]], list[T]],
                 joined: Callable[[str, list[T], Sentences], T]) -> list[T]:
    """One output per text: ``run`` called once on the sentences of every text (a text whose cut
    is None is one sentence), a text's outputs put together by ``joined(text, outputs, cut)``."""
    flat = [s for text, cut in zip(texts, cuts, strict=True)
            for s in (cut.sentences if cut is not None else [text])]
    outputs, at, out = run(flat), 0, []
    for text, cut in zip(texts, cuts, strict=True):
        n = 1 if cut is None else len(cut.sentences)
        parts, at = outputs[at:at + n], at + n
        out.append(parts[0] if cut is None else joined(text, parts, cut))
    return out
