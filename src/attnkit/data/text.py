"""Word tokenization for English and French, and its inverse.

``tokenize`` splits punctuation into tokens (it is never deleted: "?" is a word the decoder must
produce), keeps accents, and splits clitics so that ``l'homme`` and ``l'école`` share ``l'``:

* Normalisation first: Unicode NFC; curly quotes/apostrophes (‘ ’ “ ”) become straight ones;
  no-break spaces (U+00A0, U+202F narrow, U+2009 thin) and other spaces become plain spaces;
  invisible format characters (soft hyphen, zero-width space) are removed.
* French: elided words keep their apostrophe and split after it: ``l'homme`` -> ``l'`` ``homme``,
  ``c'est`` -> ``c'`` ``est``, ``jusqu'à`` -> ``jusqu'`` ``à``; ``aujourd'hui`` (and
  ``prud'homme``, ``presqu'île``) stay one word. Hyphenated compounds stay one word
  (``peut-être``, ``a-t-il``, ``est-ce``).
* English (Penn Treebank rule): contractions split *before* the apostrophe, negation before
  ``n't``: ``I'm`` -> ``I`` ``'m``, ``Tom's`` -> ``Tom`` ``'s``, ``don't`` -> ``do`` ``n't``,
  ``can't`` -> ``ca`` ``n't``, ``won't`` -> ``wo`` ``n't``. Other inner apostrophes stay
  (``o'clock``).
* Numbers keep their separators (``3,5``, ``1,000``, ``10:30``), abbreviations their dots
  (``a.m.``, ``C.V.``); ``...`` is one token.

``detokenize`` inverts this: French gets a space before ``? ! : ; %`` and inside ``« »``
(a plain space by default, the most common style in the Tatoeba references; pass
``french_space="\\u202f"`` for typographic narrow no-break spaces). sacrebleu's tokenizers split
on any Unicode space, so BLEU does not depend on that choice.

Example:
    ```python
    tokenize("C’est l’homme\u202f?", "fr")   # ["C'", "est", "l'", "homme", "?"]
    detokenize(["C'", "est", "l'", "homme", "?"], "fr")   # "C'est l'homme ?"
    tokenize("I don't know.", "en")          # ["I", "do", "n't", "know", "."]
    ```
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

LANGS = ("en", "fr")

_QUOTE_MAP = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u2032": "'",
                            "\u201c": '"', "\u201d": '"', "\u201e": '"'})
_FR_KEEP = r"aujourd'hui|prud'hom\w*|presqu'îl\w*"
_NUMBER = r"\d+(?:[.,:]\d+)+"
_ABBREV = r"(?:[^\W\d_]\.){2,}"  # a.m. / C.V. / U.S. keep their dots
_FR_TOKEN = re.compile(
    rf"(?i:{_FR_KEEP})(?!\w)"          # a few words whose apostrophe is not an elision
    r"|\w+(?:-\w+)*'(?=\w)"           # elided prefix: l' qu' jusqu' va-t'
    rf"|{_NUMBER}|{_ABBREV}"
    r"|\w+(?:-\w+)*"                  # words and hyphenated compounds
    r"|\.\.\.|\S"                     # ellipsis, any other single character
)
_EN_TOKEN = re.compile(rf"{_NUMBER}|{_ABBREV}|\w+(?:[-']\w+)*|\.\.\.|\S")
_EN_CLITIC = re.compile(r"^(.+?)('(?:s|re|ve|ll|d|m))$", re.IGNORECASE)

# Detokenization classes.
_ATTACH_LEFT = {".", ",", "...", "\u2026", ")", "]", "}"}
_ATTACH_RIGHT = {"(", "[", "{"}
_FR_SPACED = {"?", "!", ":", ";", "%", "\u203d"}
_EN_LEFT = {"?", "!", ":", ";", "%", "\u203d"}


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")


def normalize(text: str) -> str:
    """NFC, straight quotes, every Unicode space -> " ", format characters removed, trimmed."""
    text = unicodedata.normalize("NFC", text).translate(_QUOTE_MAP)
    chars = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Cf":  # soft hyphen, zero-width space/joiners: invisible, not content
            continue
        chars.append(" " if ch.isspace() or cat == "Zs" else ch)
    return " ".join("".join(chars).split())


def _split_english(chunk: str) -> list[str]:
    low = chunk.lower()
    if low.endswith("n't") and len(chunk) > 3:
        return [chunk[:-3], chunk[-3:]]
    m = _EN_CLITIC.match(chunk)
    if m and "'" not in m.group(1):
        return [m.group(1), m.group(2)]
    return [chunk]


def tokenize(text: str, lang: str, lowercase: bool = False) -> list[str]:
    """Split a sentence into word and punctuation tokens (rules in the module docstring).

    Args:
        text: one sentence or a few (any Unicode string).
        lang: ``"en"`` or ``"fr"``.
        lowercase: lowercase after normalisation.

    Returns:
        The tokens, e.g. ``tokenize("L'été arrive !", "fr") == ["L'", "été", "arrive", "!"]``.
    """
    _check_lang(lang)
    text = normalize(text)
    if lowercase:
        text = text.lower()
    if lang == "fr":
        return _FR_TOKEN.findall(text)
    tokens: list[str] = []
    for chunk in _EN_TOKEN.findall(text):
        tokens.extend(_split_english(chunk) if "'" in chunk else [chunk])
    return tokens


def _is_word(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


def words_of(text: str, lang: str) -> list[str]:
    """The words of ``text`` as a run's list of training words holds them: the `tokenize`
    tokens that hold a letter, casefolded (numbers and punctuation are not words to know)."""
    return [t.casefold() for t in tokenize(text, lang) if any(ch.isalpha() for ch in t)]


def detokenize(tokens: Sequence[str], lang: str, *, french_space: str = " ") -> str:
    """Join tokens back into text, inverting `tokenize` on normalised text.

    Args:
        tokens: tokens as produced by `tokenize` (or by a model).
        lang: ``"en"`` or ``"fr"``.
        french_space: the space French puts before ``? ! : ; %`` and inside ``« »``
            (``" "``, ``"\\u00a0"`` or ``"\\u202f"``).

    Returns:
        A single string; ``detokenize(tokenize(s, lang), lang) == s`` for text written in
        this style (straight apostrophes, one plain space between words).
    """
    _check_lang(lang)
    parts: list[str] = []
    forced: str | None = None  # separator the previous token imposes ("" after "(", "l'", ...)
    open_double = False        # straight double quotes alternate open / close
    for i, tok in enumerate(tokens):
        own = " "              # separator this token wants before itself
        after: str | None = None
        if tok in _ATTACH_LEFT:
            own = ""
        elif tok == '"':
            open_double = not open_double
            if open_double:
                after = ""
            else:
                own = ""
        elif tok in _ATTACH_RIGHT:
            after = ""
        elif lang == "fr":
            if tok in _FR_SPACED or tok == "»":
                own = french_space
            elif tok == "«":
                after = french_space
            elif len(tok) > 1 and tok.endswith("'") and _is_word(tok):
                after = ""
        else:
            if tok in _EN_LEFT:
                own = ""
            elif tok == "$":
                after = ""
            elif tok.lower() == "n't" or (len(tok) > 1 and tok[0] == "'" and _is_word(tok)):
                own = ""
            elif tok == "'":
                # Possessive of a plural ("students'") after a word, else an opening quote.
                if i > 0 and _is_word(tokens[i - 1]):
                    own = ""
                else:
                    after = ""
        if parts:
            parts.append(forced if forced is not None else own)
        parts.append(tok)
        forced = after
    return "".join(parts)
