"""Word tokenization for English and French, and its inverse.

`tokenize` normalises (NFC, straight quotes, plain spaces), splits punctuation into tokens
and splits clitics (French ``l'homme`` -> ``l'`` ``homme``; English ``don't`` -> ``do``
``n't``, Penn Treebank style); `detokenize` inverts it. The rules: docs/concepts.md, "Data"."""

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
_SPACED_IN_FR = {"?", "!", ":", ";", "%", "\u203d"}  # French spaces them, English does not


def _check_lang(lang: str) -> None:
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")


def normalize(text: str) -> str:
    """NFC, straight quotes, every Unicode space -> " ", format characters removed, trimmed."""
    text = unicodedata.normalize("NFC", text).translate(_QUOTE_MAP)
    # Format characters (soft hyphen, zero-width space and joiners) are invisible, not content.
    chars = [" " if ch.isspace() or unicodedata.category(ch) == "Zs" else ch
             for ch in text if unicodedata.category(ch) != "Cf"]
    return " ".join("".join(chars).split())


def _split_english(chunk: str) -> list[str]:
    if chunk.lower().endswith("n't") and len(chunk) > 3:
        return [chunk[:-3], chunk[-3:]]
    m = _EN_CLITIC.match(chunk)
    if m and "'" not in m.group(1):
        return [m.group(1), m.group(2)]
    return [chunk]


def tokenize(text: str, lang: str, lowercase: bool = False) -> list[str]:
    """Split a sentence into word and punctuation tokens, e.g. ``tokenize("L'été arrive !", "fr")
    == ["L'", "été", "arrive", "!"]`` (``lang``: ``"en"`` or ``"fr"``)."""
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
    """Join tokens back into text: ``detokenize(tokenize(s, lang), lang) == s`` for text in this
    style. ``french_space``: the space French puts before ``? ! : ; %`` and inside ``« »``."""
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
            own, after = (" ", "") if open_double else ("", None)
        elif tok in _ATTACH_RIGHT:
            after = ""
        elif lang == "fr":
            if tok in _SPACED_IN_FR or tok == "»":
                own = french_space
            elif tok == "«":
                after = french_space
            elif len(tok) > 1 and tok.endswith("'") and _is_word(tok):
                after = ""
        elif tok in _SPACED_IN_FR or tok.lower() == "n't" \
                or (len(tok) > 1 and tok[0] == "'" and _is_word(tok)):
            own = ""
        elif tok == "'" and i > 0 and _is_word(tokens[i - 1]):
            own = ""  # the possessive of a plural ("students'")
        elif tok in ("$", "'"):
            after = ""  # a currency sign, an opening quote
        if parts:
            parts.append(forced if forced is not None else own)
        parts.append(tok)
        forced = after
    return "".join(parts)
