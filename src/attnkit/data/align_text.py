"""Text for word alignment: two conventions, and maps between them that keep token indices.

Alignment gold standards (the Hansards of WPT03) are written as tokenized, lowercased text with
French contractions written out (``de les`` for ``des``, ``à le`` for ``au``, ``le opposition``
for ``l'opposition``, ``je ai`` for ``j'ai``) and hyphens split (``lui - même``). A translation
model trained on cased, untokenized sentences (Tatoeba) reads such text badly, and a classical
aligner trained on untokenized text does not share its vocabulary. So:

* `surface` turns the whitespace tokens to align into the text a model reads (contractions and
  elisions joined, punctuation attached, the first letter capitalised), with the character span
  of every token in that text: two tokens joined into one word (``de`` ``le`` -> ``du``) share
  its span, so the links found for the word go back to both tokens.
* `aligner_tokens` splits raw text the way the gold standard is written (lowercased, punctuation
  and hyphens split, French contractions and elisions expanded), each token with its span in
  the raw text: the text a classical aligner (eflomal) learns from, and the labels a model's
  pieces get back by span.

Both are rules for English and French only; other text passes through with its tokens unchanged.

Example:
    ```python
    text, spans = surface("je ai vu le homme de le village .".split(), "fr")
    # "J'ai vu l'homme du village.", spans[5] == spans[6] == (16, 18) ("du")
    aligner_tokens("Je l'ai vu au marché.", "fr")
    # [("je", (0, 2)), ("le", (3, 5)), ("ai", (5, 7)), ("vu", (8, 10)),
    #  ("à", (11, 13)), ("le", (11, 13)), ("marché", (14, 20)), (".", (20, 21))]
    ```
"""

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
    """``text`` as the alignment gold standard writes it, each token with its span in ``text``.

    Lowercased; punctuation, hyphens and English clitics split (``do n't``, ``it 's``);
    French elisions and contractions written out (``l'`` -> ``le``, ``du`` -> ``de le``, both
    with the span of ``du``).

    Args:
        text: raw text (cased, untokenized) or already tokenized text.
        lang: ``"en"`` or ``"fr"`` (other languages: the same splitting, nothing expanded).

    Returns:
        ``[(token, (start, end))]``.
    """
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
    """The text a translation model reads for whitespace ``tokens``, and each token's span in it.

    French: ``de le`` / ``de les`` / ``à le`` / ``à les`` become ``du`` / ``des`` / ``au`` /
    ``aux`` (not before a vowel or an infinitive: ``de le faire``), ``le`` / ``je`` / ``que`` /
    ... before a vowel elide (``le homme`` -> ``l'homme``), ``si il`` -> ``s'il``,
    ``aujourd' hui`` -> ``aujourd'hui``. English: clitics attach (``do n't`` -> ``don't``),
    ``i`` -> ``I``. Both: punctuation attaches, ``a - b`` -> ``a-b``, a lowercase first letter
    is capitalised. Text already written this way comes back as it was (single spaces).

    Args:
        tokens: the whitespace tokens of one sentence.
        lang: ``"en"`` or ``"fr"``.

    Returns:
        ``(text, spans)``: ``spans[k]`` is the ``(start, end)`` of the word token ``k`` became
        (tokens joined into one word share its span).
    """
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
    """For each piece of the model's text, the tokens it belongs to (by character overlap; a
    piece that overlaps none, such as a lone word-start mark, goes to the token after it).

    Args:
        piece_spans: ``(start, end)`` of each model piece in the text.
        token_spans: ``(start, end)`` of each token in the same text (`surface`).

    Returns:
        ``owners[p]``: the token indices of piece ``p`` (empty only when there is no token).
    """
    owners = []
    for start, end in piece_spans:
        hit = [k for k, (a, b) in enumerate(token_spans) if a < end and start < b]
        if not hit and token_spans:
            after = [k for k, (a, _) in enumerate(token_spans) if a >= start]
            hit = [min(after, key=lambda k: token_spans[k][0])] if after else [
                len(token_spans) - 1]
        owners.append(hit)
    return owners
