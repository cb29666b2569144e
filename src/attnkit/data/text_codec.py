"""Text <-> tokens for a translation run: words (`attnkit.data.text`, per language), or the
pieces of the run's joint sentencepiece model (``--subword``), whose decoding restores the
text. `TextCodec.encode_capped` reads at most ``limit`` tokens and counts the rest without
holding them, so one line of ten million words costs one chunk at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from attnkit.data.subword import SubwordModel
from attnkit.data.text import detokenize, tokenize

SRC_LANG, TGT_LANG = "en", "fr"
Pair = tuple[str, str]
TokenPair = tuple[list[str], list[str]]
# Texts longer than this are tokenized chunk by chunk (cut at whitespace): about 10k words each.
CHUNK_CHARS = 1 << 16


def text_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, cut at the piece's last
    whitespace outside an HTML line break when it has one, so that tokens stay whole."""
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = max(text.rfind(c, start + 1, end) for c in " \n\t\r")
        if cut < 0:
            cut = end
        else:  # a line break's own whitespace: cut before its "<" instead
            br = re.search(r"<br\s*$", text[max(start, cut - 16):cut], re.IGNORECASE)
            cut = max(cut - len(br.group()), start + 1) if br is not None else cut
        yield text[start:cut]
        start = cut
    yield text[start:]


class TextCodec:
    """Tokenize and detokenize both languages of a translation run (``subword``: None for words)."""

    def __init__(self, subword: SubwordModel | None = None):
        self.subword = subword

    def encode(self, text: str, lang: str) -> list[str]:
        """The tokens of ``text`` (``lang``: ``"en"`` or ``"fr"``; subwords ignore it)."""
        return tokenize(text, lang) if self.subword is None else self.subword.encode(text)

    def decode(self, tokens: Sequence[str], lang: str) -> str:
        """The text of ``tokens``: the inverse of `encode`."""
        return detokenize(tokens, lang) if self.subword is None else self.subword.decode(tokens)

    def encode_with_spans(self, text: str, lang: str) -> tuple[list[str], list[tuple[int, int]]]:
        """The tokens of ``text`` (those of `encode`) and the ``(start, end)`` characters of each:
        each word is encoded alone and its characters shared out among its tokens by length (a
        ``▁`` word mark counts for nothing)."""
        tokens, spans, pos = [], [], 0
        for word in text.split():
            start = text.index(word, pos)
            pos = start + len(word)
            pieces = self.encode(word, lang)
            sizes = [len(p.replace("\u2581", "")) for p in pieces]
            total = sum(sizes) or 1
            done = 0
            for piece, size in zip(pieces, sizes, strict=True):
                a = start + round(done * len(word) / total)
                done += size
                tokens.append(piece)
                spans.append((a, start + round(done * len(word) / total)))
        return tokens, spans

    def encode_capped(self, text: str, lang: str, limit: int) -> tuple[list[str], int]:
        """The first ``limit`` tokens of ``text`` and the number of tokens after them."""
        kept, cut = [], 0
        for chunk in text_chunks(text):
            tokens = self.encode(chunk, lang)
            room = max(0, limit - len(kept))
            kept += tokens[:room]
            cut += len(tokens) - min(room, len(tokens))
        return kept, cut

    def encode_pairs(self, pairs: Sequence[Pair]) -> list[TokenPair]:
        """``[(english_tokens, french_tokens)]`` of ``(english, french)`` pairs."""
        return [(self.encode(en, SRC_LANG), self.encode(fr, TGT_LANG)) for en, fr in pairs]


def word_count(text: str, lang: str) -> int:
    """The number of words of ``text`` (`tokenize`), counted chunk by chunk."""
    return sum(len(tokenize(chunk, lang)) for chunk in text_chunks(text))
