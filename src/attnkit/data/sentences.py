"""A text cut into sentences, and their translations put back together with its layout.

Translation models here are trained on single sentences: given a paragraph they answer about
one sentence's worth and drop the rest. So a text is cut into sentences first, as deployed
translators do, by `sentencex` (Wikimedia's maintained rule-based splitter: abbreviations such
as "Mr." and "e.g.", decimals, quotes), each sentence is translated, and `Sentences.join` puts
the translations back with the text's own breaks: a space between the sentences of a line, a
line break where the text had one, a blank line between paragraphs.

Paragraphs are cut at blank lines first (a line of only spaces counts as blank), then each is
given to the splitter: it keeps a ``"\\n\\n"`` it sees as its own segment, but not every blank
line it is given. `readable_sentences` keeps the sentences a model reads a token of, and
`per_sentence` runs a batch function over the sentences of many texts at once and gives each
text its sentences' outputs back, joined.

Example:
    ```python
    s = split_sentences("The cat is black. My friends left.\\n\\nShe will find the dogs.")
    s.sentences       # ["The cat is black.", "My friends left.", "She will find the dogs."]
    s.breaks          # [" ", "\\n\\n"]
    s.join(["Le chat est noir.", "Mes amis sont partis.", "Elle trouvera les chiens."])
    ```
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")


@dataclass(frozen=True)
class Sentences:
    """A text's sentences and what separated them.

    Attributes:
        sentences: the sentences, without their surrounding whitespace (none for a blank
            text).
        breaks: ``len(sentences) - 1`` separators, ``breaks[i]`` between sentence ``i`` and
            ``i + 1``: ``" "``, ``"\\n"`` (a line break) or ``"\\n\\n"`` (a new paragraph).
    """

    sentences: list[str]
    breaks: list[str]

    def join(self, parts: Sequence[str]) -> str:
        """One output per sentence (their translations), joined by the text's breaks.

        Raises:
            ValueError: not one part per sentence.
        """
        if len(parts) != len(self.sentences):
            raise ValueError(f"{len(parts)} parts for {len(self.sentences)} sentences")
        out = parts[0] if parts else ""
        for gap, part in zip(self.breaks, parts[1:], strict=True):
            out += gap + part
        return out


def split_sentences(text: str, language: str = "en") -> Sentences:
    """Cut ``text`` into sentences (module doc).

    Args:
        text: any text: a sentence, a paragraph, several paragraphs.
        language: an ISO 639 code the splitter knows (its abbreviations); ``"en"`` for the
            translate app's source.
    """
    from sentencex import segment

    sentences: list[str] = []
    breaks: list[str] = []
    for p, paragraph in enumerate(_PARAGRAPH.split(text.strip())):
        gap = "\n\n" if p else ""
        for piece in segment(language, paragraph):
            core = piece.strip()
            if not core:   # a break the splitter kept as its own segment
                gap += piece
                continue
            if sentences:
                gap += piece[:len(piece) - len(piece.lstrip())]
                breaks.append(_break(gap))
            sentences.append(core)
            gap = piece[len(piece.rstrip()):]
    return Sentences(sentences, breaks)


def _break(gap: str) -> str:
    """The whitespace between two sentences, reduced to what a reader sees of it."""
    newlines = gap.count("\n")
    return "\n\n" if newlines >= 2 else "\n" if newlines else " "


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
    """One output per text: ``run`` called once on the sentences of every text (a text whose
    cut is None is one sentence, given as it is), and the outputs of a text of several
    sentences put together by ``joined(text, outputs, cut)``.

    Example:
        ```python
        cuts = [readable_sentences(t, "en", str.strip) for t in texts]
        per_sentence(texts, cuts, translate, lambda text, outs, cut: cut.join(outs))
        ```
    """
    flat = [s for text, cut in zip(texts, cuts, strict=True)
            for s in (cut.sentences if cut is not None else [text])]
    outputs, at, out = run(flat), 0, []
    for text, cut in zip(texts, cuts, strict=True):
        n = 1 if cut is None else len(cut.sentences)
        parts, at = outputs[at:at + n], at + n
        out.append(parts[0] if cut is None else joined(text, parts, cut))
    return out
