"""The caption explorer: for each generated word, where in the image the model looked.

`caption_page` writes one self-contained page: an image picker, a method picker, the caption
as word buttons and a slider, and the image with the selected word's map over it, upsampled
bilinearly and blended as `attnkit.viz.overlay.overlay_image` does (docs/concepts.md,
"Explorer pages").
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnkit.viz import explorer
from attnkit.viz._save import png_data_uri
from attnkit.viz.overlay import check_image, check_maps
from attnkit.viz.palettes import WEIGHTS_ON_IMAGE

# Larger images are shrunk before embedding: the page stays small and the map (often 7x7 or
# 14x14) has no detail finer than this anyway.
MAX_IMAGE_SIDE = 384

FILES = explorer.app_files("caption_page")
# The policy source of its script, listed by `attnkit serve`'s live page, which frames this page.
SCRIPT_SOURCE = explorer.script_source(FILES["script"])


@dataclass(frozen=True)
class CaptionExample:
    """One captioned image: uint8 ``image [H, W, 3]``, ``n`` ``words``, ``maps [n, h, w]`` (>= 0),
    ``references`` shown under the caption, other ``methods`` by name (each like ``maps``).
    """

    image: object
    words: Sequence[str]
    maps: object
    references: Sequence[str] = ()
    methods: Mapping[str, object] = field(default_factory=dict)


def _example_data(item, k: int) -> dict:
    item = explorer.coerce(item, CaptionExample, f"caption example {k}")
    img = check_image(item.image)
    m = check_maps(item.maps, item.words, f"caption example {k}: ")
    if not item.words:
        raise ValueError(f"caption example {k}: the caption has no words")
    return {"methods": explorer.encode_methods(item.methods, m.shape, f"caption example {k}"),
            "png": png_data_uri(img, MAX_IMAGE_SIDE), "aspect": img.shape[1] / img.shape[0],
            "words": [str(w) for w in item.words], "h": int(m.shape[1]), "w": int(m.shape[2]),
            "maps": explorer.encode_weights(m, f"caption example {k}: maps"),
            "refs": [str(r) for r in item.references]}


def caption_page(images: Sequence[CaptionExample | Mapping], summary: Mapping[str, object] | None,
                 path: str | os.PathLike | None = None, *,
                 title: str = "Captions: where the model looked for each word",
                 alpha: float = 0.5, order: Sequence[str] = (),
                 note: str | None = None) -> str:
    """Build (and optionally write to ``path``, atomically) the caption explorer page's HTML.

    Args:
        images: `CaptionExample` items (or dicts with the same keys).
        summary: model and data facts for the summary box.
        alpha: weight of the coloured map in the blend (`attnkit.viz.overlay.overlay_image`).
        order: the method picker's order; the page opens on the first an image carries.
        note: one more sentence under the legend.

    Raises:
        ValueError: no image, an image that is not uint8 ``[H, W, 3]``, maps not ``[n, h, w]``.
    """
    if not images:
        raise ValueError("caption_page needs at least one image")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    data = {"images": [_example_data(e, k) for k, e in enumerate(images)], "alpha": alpha,
            "palettes": explorer.palette_data(WEIGHTS_ON_IMAGE), "seq": WEIGHTS_ON_IMAGE,
            "order": [str(m) for m in order]}
    legend = ("The bright patch shows where the model looked in the image while it chose the "
              "selected word of its caption (dark = ignored).",
              "Pick a word with its button, the slider or the arrow keys; untick \u201cshow "
              "attention\u201d to see the plain image.", *([note] if note else []))
    return explorer.explorer_page(title, legend, summary, data=data, path=path, **FILES)
