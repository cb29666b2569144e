"""Tokens shaded by a score (attention weight, saliency): for terminals and for HTML.

Weights are normalised by their maximum, so the most-attended token is fully shaded; negative
weights count as 0; the colour comes from `attnkit.viz.palettes.WEIGHTS` (light -> dark).
With ``signed=True`` the scores are contributions: divided by the largest magnitude and drawn with
the diverging `attnkit.viz.palettes.SIGNED` palette (red = negative, blue = positive).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from attnkit.viz._save import to_numpy
from attnkit.viz.palettes import SIGNED, WEIGHTS, colors_for, signed_to_unit, text_color


def _checked_scores(tokens: Sequence[str], scores) -> np.ndarray:
    """``scores`` as float64 ``[T]``; ValueError unless 1-D, ``len(tokens)`` long and finite."""
    s = to_numpy(scores, "scores").astype(np.float64)
    if s.ndim != 1 or s.shape[0] != len(tokens):
        raise ValueError(f"scores must have shape [T] = [len(tokens)={len(tokens)}], "
                         f"got {list(s.shape)}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or infinity")
    return s


def normalize_scores(tokens: Sequence[str], scores) -> np.ndarray:
    """Scores ``[T]`` divided by their max and clipped to [0, 1] (all-zero stays zero);
    ValueError unless 1-D, ``len(tokens)`` long and finite."""
    s = np.clip(_checked_scores(tokens, scores), 0.0, None)
    top = s.max() if s.size else 0.0
    return s / top if top > 0 else s


def _unit_and_palette(tokens: Sequence[str], scores, signed: bool) -> tuple[np.ndarray, str]:
    # Position of each score on its palette, in [0, 1], and the palette's name.
    if not signed:
        return normalize_scores(tokens, scores), WEIGHTS
    return signed_to_unit(_checked_scores(tokens, scores)), SIGNED


def shade_text_ansi(tokens: Sequence[str], scores, *, color: bool = True, truecolor: bool = True,
                    sep: str = " ", signed: bool = False) -> str:
    """Tokens with ANSI background shading, darker = higher score (``scores [T]``); one string.

    ``color=False`` gives plain ``token(0.42)`` for logs and pipes; ``truecolor=False`` uses the
    256-colour ramp; ``signed`` scores use the diverging palette. Every shaded token ends with a
    reset code.

    Example:
        >>> print(shade_text_ansi(["the", "duck"], [0.1, 0.9]))
    """
    s, palette = _unit_and_palette(tokens, scores, signed)
    if not color:
        if signed:
            return sep.join(f"{t}({2 * v - 1:+.2f})" for t, v in zip(tokens, s, strict=True))
        return sep.join(f"{t}({v:.2f})" for t, v in zip(tokens, s, strict=True))
    parts = []
    for t, v, rgb in zip(tokens, s, colors_for(s, palette).astype(float), strict=True):
        if truecolor:
            bg = f"48;2;{int(rgb[0])};{int(rgb[1])};{int(rgb[2])}"
        elif signed:
            # 256-colour cube: reds below the middle, blues above, light grey near it.
            bg = "48;5;" + ("160" if v < 0.35 else "33" if v > 0.65 else "252")
            rgb = (215, 0, 0) if v < 0.35 else (0, 135, 255) if v > 0.65 else (208, 208, 208)
        else:
            # Grey ramp 232 (darkest) .. 255 (lightest): 24 steps.
            level = 23 - int(round(v * 23))
            bg = f"48;5;{232 + level}"
            rgb = (8 + 10 * level,) * 3
        fg = "97" if text_color(rgb) == "#fff" else "30"  # light text on dark backgrounds
        parts.append(f"\x1b[{bg};{fg}m{t}\x1b[0m")
    return sep.join(parts)


def shade_text_html(tokens: Sequence[str], scores, *, sep: str = " ", digits: int = 4,
                    signed: bool = False) -> str:
    """Tokens (escaped) as ``<span class="attnkit-token">`` elements whose background is the score's
    palette colour, the raw score to ``digits`` decimals in the ``title``; ``signed``: diverging.
    """
    s, palette = _unit_and_palette(tokens, scores, signed)
    raw = to_numpy(scores, "scores").astype(np.float64)
    return sep.join(
        f'<span class="attnkit-token" style="background-color: rgb({r},{g},{b}); color: '
        f'{text_color((r, g, b))}; padding: 0 2px; border-radius: 3px" '
        f'title="{x:.{digits}f}">{html.escape(str(t))}</span>'
        for t, (r, g, b), x in zip(tokens, colors_for(s, palette).tolist(), raw, strict=True))
