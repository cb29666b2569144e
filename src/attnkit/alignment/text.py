"""Text for word alignment: the gold standards' tokenized convention and a model's text, with
maps between them that keep token indices (English and French rules only).

`surface` writes whitespace tokens (``je ai vu le homme de le village .``) as the text a model
reads (``J'ai vu l'homme du village.``), each token with its span; `aligner_tokens` splits
raw text as the gold standard writes it, with spans: what eflomal learns from. Conventions:
docs/concepts.md, "Word alignment"."""

from __future__ import annotations

import re
from collections.abc import Sequence

Span = tuple[int, int]

# French words written out in the gold standard, by their elided form (``l'`` -> ``le``).
ELIDED = {"l'": "le", "j'": "je", "d'": "de", "n'": "ne", "qu'": "que", "c'": "ce", "s'": "se",
          "m'": "me", "t'": "te", "jusqu'": "jusque", "lorsqu'": "lorsque",
          "puisqu'": "puisque", "quoiqu'": "quoique"}
CONTRACTED = {"du": ("de", "le"), "des": ("de", "les"), "au": ("à", "le"), "aux": ("à", "les")}
# The inverse, for the model: a word that elides before a vowel, and pairs that contract.
ELIDES = {full: short for short, full in ELIDED.items()} | {"la": "l'"}
CONTRACTS = {pair: word for word, pair in CONTRACTED.items()}
_VOWEL = re.compile(r"^[aeiouyhàâäéèêëîïôöûüœæ]", re.IGNORECASE)
# "de le faire", "à le dire": "le" is a pronoun before these verbs and does not contract (a
# list, not a rule on endings: "de le ministre" does contract).
_PRONOUN_BEFORE = frozenset("faire dire voir être avoir prendre mettre croire savoir rendre "
                            "lire donner trouver garder accepter changer".split())
_ATTACH_LEFT = {".", ",", ")", "]", "...", "%"}
_ATTACH_RIGHT = {"(", "["}
_EN_CLITICS = {"n't", "'s", "'re", "'ve", "'ll", "'d", "'m", "'"}

_APOS = "'\u2019"
_TOKEN = re.compile(
    rf"aujourd[{_APOS}](?=hui)"                    # aujourd' hui, as the gold standard writes it
    rf"|\w+?(?=n[{_APOS}]t\b)|n[{_APOS}]t\b"        # English negation: do n't
    rf"|[{_APOS}](?:s|re|ve|ll|d|m)\b"              # English clitics: 's 're
    rf"|\w+[{_APOS}](?=\w)(?!(?:s|re|ve|ll|d|m)\b)"  # French elisions: l' qu' jusqu'
    r"|\d+(?:[.,]\d+)*|\w+|\S", re.IGNORECASE)


def aligner_tokens(text: str, lang: str) -> list[tuple[str, Span]]:
    """``[(token, (start, end))]`` of ``text`` (raw or tokenized) as the alignment gold
    standard writes it: lowercased; punctuation, hyphens and English clitics split (``do
    n't``); French (``lang="fr"``) elisions and contractions written out (``du`` -> ``de le``,
    both with the span of ``du``)."""
    out: list[tuple[str, Span]] = []
    for m in _TOKEN.finditer(text):
        word, span = m.group().lower().replace("\u2019", "'"), m.span()
        if lang == "fr" and word in ELIDED:
            out.append((ELIDED[word], span))
        elif lang == "fr" and word in CONTRACTED:
            out.extend((part, span) for part in CONTRACTED[word])
        else:
            out.append((word, span))
    return out


def _glued(tokens: Sequence[str], lang: str) -> list[tuple[str, list[int], str]]:
    """Words of the surface text: ``(text, the token indices it stands for, separator
    before it)``."""
    words: list[tuple[str, list[int], str]] = []
    k, sep_next = 0, " "
    while k < len(tokens):
        tok, low = tokens[k], tokens[k].lower()
        nxt = tokens[k + 1] if k + 1 < len(tokens) else ""
        sep, sep_next = sep_next, " "
        word, used = tok, [k]
        if lang == "fr" and (low, nxt.lower()) in CONTRACTS and not (
                nxt.lower() == "le" and k + 2 < len(tokens) and (
                    _VOWEL.match(tokens[k + 2]) or tokens[k + 2].lower() in _PRONOUN_BEFORE)):
            word, used = _cased(CONTRACTS[(low, nxt.lower())], tok), [k, k + 1]
        elif lang == "fr" and low in ELIDES and nxt and _VOWEL.match(nxt) and nxt[0].isalpha():
            word, sep_next = _cased(ELIDES[low], tok), ""
        elif lang == "fr" and low == "si" and nxt.lower() in ("il", "ils"):
            word, sep_next = _cased("s'", tok), ""
        elif lang == "fr" and low.endswith("'") and nxt:
            sep_next = ""   # aujourd' hui
        elif tok == "-" and words and nxt and words[-1][0][-1:].isalnum() and nxt[0].isalnum():
            sep, sep_next = "", ""
        elif tok in _ATTACH_LEFT or (lang == "en" and low in _EN_CLITICS):
            sep = ""
        elif tok in _ATTACH_RIGHT:
            sep_next = ""
        elif lang == "en" and tok == "i":
            word = "I"
        words.append((word, used, sep))
        k += len(used)
    return words


def _cased(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def surface(tokens: Sequence[str], lang: str) -> tuple[str, list[Span]]:
    """``(text, spans)``: the text a translation model reads for one sentence's whitespace
    ``tokens`` (contractions and elisions joined, clitics and punctuation attached, the first
    letter capitalised; docs/concepts.md), and ``spans[k]``, the ``(start, end)`` of the word
    token ``k`` became (tokens joined into one word share its span)."""
    spans: list[Span] = [(0, 0)] * len(tokens)
    parts: list[str] = []
    pos = 0
    for i, (word, used, sep) in enumerate(_glued(tokens, lang)):
        if i == 0:
            word = word[:1].upper() + word[1:] if word[:1].islower() else word
        elif sep:
            parts.append(sep)
            pos += len(sep)
        parts.append(word)
        for k in used:
            spans[k] = (pos, pos + len(word))
        pos += len(word)
    return "".join(parts), spans


def pieces_to_tokens(piece_spans: Sequence[Span], token_spans: Sequence[Span]) -> list[list[int]]:
    """``owners[p]``: the tokens (their spans in the same text, `surface`) piece ``p`` overlaps;
    a piece that overlaps none, such as a lone word-start mark, goes to the token after it."""
    owners = []
    for start, end in piece_spans:
        hit = [k for k, (a, b) in enumerate(token_spans) if a < end and start < b]
        if not hit and token_spans:
            after = [k for k, (a, _) in enumerate(token_spans) if a >= start]
            hit = [min(after, key=lambda k: token_spans[k][0], default=len(token_spans) - 1)]
        owners.append(hit)
    return owners
