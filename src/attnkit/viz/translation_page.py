"""The translation attention explorer: which source words each output word looked at.

`translation_page` writes one self-contained page: an example picker, a method and a layer/head
selector, the two sentences as words to hover or Tab to, and the matrix in a scrolling box with
sticky labels (docs/concepts.md, "Explorer pages").
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnkit.viz import explorer
from attnkit.viz._save import to_numpy
from attnkit.viz.palettes import WEIGHTS

FILES = explorer.app_files("translation_page")
# The policy source of its script, listed by `attnkit serve`'s live page, which frames this page.
SCRIPT_SOURCE = explorer.script_source(FILES["script"])


@dataclass(frozen=True)
class TranslationExample:
    """One translated sentence and its attention.

    Args:
        source_tokens, target_tokens: ``T_src`` and ``T_tgt`` strings.
        attention: ``[layers, heads, T_tgt, T_src]``, ``[heads, T_tgt, T_src]`` or ``[T_tgt,
            T_src]``.
        references: reference translations, shown under the output.
        scores: per-sentence figures (e.g. ``{"chrF": 61.2}``).
        methods: other explanations, by name, each ``[T_tgt, T_src]`` weights >= 0.
        links: word alignment links ``(source index, target index)``, outlined on hover.
    """

    source_tokens: Sequence[str]
    target_tokens: Sequence[str]
    attention: object
    references: Sequence[str] = ()
    scores: Mapping[str, object] = field(default_factory=dict)
    methods: Mapping[str, object] = field(default_factory=dict)
    links: Sequence[tuple[int, int]] = ()


def _example_data(ex: TranslationExample, k: int) -> dict:
    """One example as page data; the attention is checked and packed as ``[L, H, T, S]``."""
    w = to_numpy(ex.attention, "attention")
    t, s = len(ex.target_tokens), len(ex.source_tokens)
    if w.ndim not in (2, 3, 4) or w.shape[-2:] != (t, s):
        raise ValueError(f"example {k}: attention must be [layers, heads, T_tgt, T_src], [heads, "
                         f"T_tgt, T_src] or [T_tgt, T_src] with T_tgt = {t} target tokens and "
                         f"T_src = {s} source tokens, got {list(w.shape)}")
    if t == 0 or s == 0:
        raise ValueError(f"example {k}: needs at least one source and one target token")
    w4 = w.reshape((1,) * (4 - w.ndim) + w.shape)
    links = [[int(i), int(j)] for i, j in ex.links]
    for i, j in links:
        if not (0 <= i < s and 0 <= j < t):
            raise ValueError(f"example {k}: link {i}-{j} names a token beyond the sentence "
                             f"({s} source, {t} target tokens)")
    return {"methods": explorer.encode_methods(ex.methods, (t, s), f"example {k}"), "links": links,
            "src": [str(x) for x in ex.source_tokens], "tgt": [str(x) for x in ex.target_tokens],
            "L": int(w4.shape[0]), "H": int(w4.shape[1]), "T": t, "S": s,
            "w": explorer.encode_weights(w4, f"example {k}: attention"),
            "refs": [str(r) for r in ex.references],
            "scores": [[str(a), str(b)] for a, b in dict(ex.scores).items()]}


def translation_page(examples: Sequence[TranslationExample | Mapping],
                     summary: Mapping[str, object] | None, path: str | os.PathLike | None = None,
                     *, title: str = "Translation: where the model looked",
                     metrics: Mapping[str, object] | None = None, order: Sequence[str] = (),
                     note: str | None = None) -> str:
    """Build (and optionally write to ``path``, atomically) the translation explorer page's HTML.

    Args:
        examples: `TranslationExample` items (or dicts with the same keys).
        summary, metrics: model and data facts; run-level figures (e.g. ``{"BLEU": 27.1}``).
        order: the method picker's order; the page opens on the first a sentence carries.
        note: one more sentence under the legend.

    Raises:
        ValueError: no example, or an attention shape that does not match its tokens.
    """
    if not examples:
        raise ValueError("translation_page needs at least one example")
    examples = [explorer.coerce(e, TranslationExample, f"translation example {k}")
                for k, e in enumerate(examples)]
    data = {"examples": [_example_data(e, k) for k, e in enumerate(examples)],
            "metrics": [[str(a), str(b)] for a, b in dict(metrics or {}).items()],
            "palettes": explorer.palette_data(WEIGHTS), "seq": WEIGHTS,
            "order": [str(m) for m in order]}
    heads = any(e["L"] * e["H"] > 1 for e in data["examples"])
    methods = any(e["methods"] for e in data["examples"])
    legend = ("Each row of the grid is an output word and each column a source word: the darker "
              "the cell, the more the model looked at that source word while writing that "
              "output word.",
              "Hover over or Tab to a word (in the sentences or on the grid edges) to shade its "
              "partners" + ("; pick a layer and a head below (the default blends all heads)"
                            if heads else "")
              + ("; the method picker shows other explanations of the same words (gradient "
                 "attributions: how much each source word's vector changed the output word)."
                 if methods else "."), *([note] if note else []))
    return explorer.explorer_page(title, legend, summary, data=data, path=path, **FILES)
