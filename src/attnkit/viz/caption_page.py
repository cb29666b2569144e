"""The caption explorer: for each generated word, where in the image the model looked.

``caption_page(images, summary, path)`` writes one self-contained page: an image picker, a
method picker (attention, or another explanation the examples carry, such as integrated
gradients; hidden when there is only attention), the caption as word buttons plus a slider
(both keyboard-operable), the image (a PNG data URI) with the selected word's map over it, and
a colour bar. The map is upsampled bilinearly in the
page (as `attnkit.viz.overlay.upsample_map` does), scaled by the word's peak and drawn with
the perceptually uniform `attnkit.viz.palettes.WEIGHTS_ON_IMAGE` palette (dark = ignored,
bright = the peak), at the same blend as `attnkit.viz.overlay.overlay_image`.

Example:
    >>> ex = CaptionExample(np.zeros((64, 64, 3), np.uint8), ["a", "dog"], np.ones((2, 7, 7)))
    >>> page = caption_page([ex], {"model": "show-attend-tell"}, "caption.html")
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from attnkit.viz._save import to_numpy
from attnkit.viz.explorer import (
    encode_weights,
    explorer_page,
    palette_data,
    script_source,
)
from attnkit.viz.overlay import check_image
from attnkit.viz.palettes import WEIGHTS_ON_IMAGE

# Larger images are shrunk before embedding: the page stays small and the map (often 7x7 or
# 14x14) has no detail finer than this anyway.
MAX_IMAGE_SIDE = 384


@dataclass(frozen=True)
class CaptionExample:
    """One captioned image.

    Args:
        image: uint8 ``[H, W, 3]``.
        words: the ``n`` generated words.
        maps: ``[n, h, w]`` attention over the image grid, one map per word (weights >= 0).
        references: reference captions, shown under the caption.
        methods: other explanations, by name, each ``[n, h, w]`` weights >= 0 like ``maps``.
    """

    image: object
    words: Sequence[str]
    maps: object
    references: Sequence[str] = ()
    methods: Mapping[str, object] = field(default_factory=dict)


def _png_uri(img: np.ndarray) -> str:
    pil = Image.fromarray(img)
    side = max(pil.size)
    if side > MAX_IMAGE_SIDE:
        k = MAX_IMAGE_SIDE / side
        pil = pil.resize((max(1, round(pil.width * k)), max(1, round(pil.height * k))),
                         Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    pil.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _example_data(item, k: int) -> dict:
    if isinstance(item, Mapping):
        try:
            item = CaptionExample(**item)
        except TypeError as err:
            raise ValueError(f"caption example {k}: {err}") from err
    if not isinstance(item, CaptionExample):
        raise ValueError(f"caption example {k} must be a CaptionExample or a dict, "
                         f"got {type(item).__name__}")
    img = check_image(item.image)
    m = to_numpy(item.maps, "maps")
    n = len(item.words)
    if m.ndim != 3 or m.shape[0] != n or 0 in m.shape[1:]:
        raise ValueError(f"caption example {k}: maps must be [n, h, w] with n = len(words) = {n}, "
                         f"got {list(m.shape)}")
    if n == 0:
        raise ValueError(f"caption example {k}: the caption has no words")
    methods = {}
    for name, values in dict(item.methods).items():
        mm = to_numpy(values, f"caption example {k}: method {name}")
        if mm.shape != m.shape:
            raise ValueError(f"caption example {k}: method {name!r} must be shaped like the "
                             f"maps {list(m.shape)}, got {list(mm.shape)}")
        methods[str(name)] = encode_weights(mm, f"caption example {k}: method {name}")
    return {"methods": methods,"png": _png_uri(img), "aspect": img.shape[1] / img.shape[0],
            "words": [str(w) for w in item.words], "h": int(m.shape[1]), "w": int(m.shape[2]),
            "maps": encode_weights(m, f"caption example {k}: maps"),
            "refs": [str(r) for r in item.references]}


def caption_page(images: Sequence[CaptionExample | Mapping], summary: Mapping[str, object] | None,
                 path: str | os.PathLike | None = None, *,
                 title: str = "Captions: where the model looked for each word",
                 alpha: float = 0.5, order: Sequence[str] = (),
                 note: str | None = None) -> str:
    """Build (and optionally write, atomically) the caption explorer page.

    Args:
        images: `CaptionExample` items (or dicts with the same keys).
        summary: model and data facts for the summary box.
        path: where to write the page; None only returns it.
        title: page heading.
        alpha: weight of the coloured map in the blend, as in
            `attnkit.viz.overlay.overlay_image`.
        order: the method picker's order (``"attention"`` and the examples' method names);
            the page opens on the first an image carries. Empty: attention first.
        note: one more sentence under the legend (which method the page opens on, and why).

    Returns:
        The HTML text.

    Raises:
        ValueError: no image, an image that is not uint8 ``[H, W, 3]``, maps not ``[n, h, w]``.
    """
    if not images:
        raise ValueError("caption_page needs at least one image")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    data = {"images": [_example_data(e, k) for k, e in enumerate(images)], "alpha": alpha,
            "palettes": palette_data(WEIGHTS_ON_IMAGE), "seq": WEIGHTS_ON_IMAGE,
            "order": [str(m) for m in order]}
    legend = ("The bright patch shows where the model looked in the image while it chose the "
              "selected word of its caption (dark = ignored).",
              "Pick a word with its button, the slider or the arrow keys; untick \u201cshow "
              "attention\u201d to see the plain image.", *([note] if note else []))
    return explorer_page(title, legend, summary, body=_BODY, data=data, script=_JS, css=_CSS,
                         path=path)


_BODY = """
<div class="controls">
  <span id="image-box"><label for="image">Image</label> <select id="image"></select></span>
  <span id="method-box"><label for="method">Method</label> <select id="method"></select></span>
  <span><label for="step">Word</label> <input type="range" id="step" min="0" max="0" value="0">
  </span>
  <span><input type="checkbox" id="show" checked> <label for="show">show attention</label></span>
</div>
<div id="words" class="words" role="group" aria-label="caption words"></div>
<div id="refs" class="muted"></div>
<div class="stage">
  <img id="photo" alt="the input image">
  <canvas id="heat" aria-label="attention of the selected word"></canvas>
</div>
<div id="bar"></div>
<p id="readout" class="muted" aria-live="polite"></p>
"""

_CSS = """
.words { display: flex; flex-wrap: wrap; gap: .35em; margin: .3em 0 .6em; }
.words button { border: 1px solid #888; border-radius: 4px; background: #fff; cursor: pointer; }
.words button[aria-pressed="true"] { background: var(--accent); color: #fff;
                                      border-color: var(--accent); }
.stage { position: relative; display: inline-block; width: min(512px, 100%); }
.stage img, .stage canvas { display: block; width: 100%; height: auto; }
.stage canvas { position: absolute; left: 0; top: 0; height: 100%; }
#refs p { margin: .1em 0; }
"""

_JS = r"""
const LUT = DATA.palettes[DATA.seq];
const imgSel = document.getElementById("image"), step = document.getElementById("step");
const show = document.getElementById("show"), canvas = document.getElementById("heat");
const methSel = document.getElementById("method");
let ex = null, maps = null, buttons = [];

function build() {
  ex = DATA.images[Number(imgSel.value)];
  fillMethods(methSel, DATA.order, ex.methods);
  pickMethod();
  document.getElementById("photo").src = ex.png;
  const side = 256;
  canvas.width = ex.aspect >= 1 ? side : Math.round(side * ex.aspect);
  canvas.height = ex.aspect >= 1 ? Math.round(side / ex.aspect) : side;
  const box = document.getElementById("words"); box.replaceChildren(); buttons = [];
  ex.words.forEach((w, i) => {
    const b = el("button", null, w); b.type = "button";
    b.addEventListener("click", () => select(i));
    b.addEventListener("keydown", (ev) => {
      const d = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (d && buttons[i + d]) { ev.preventDefault(); select(i + d); buttons[i + d].focus(); }
    });
    buttons.push(b); box.append(b);
  });
  const refs = document.getElementById("refs"); refs.replaceChildren();
  for (const r of ex.refs) refs.append(el("p", null, "Reference: " + r));
  step.max = ex.words.length - 1;
  select(0);
}
function pickMethod() {
  maps = decodeWeights(methSel.value === "attention" ? ex.maps : ex.methods[methSel.value]);
}
function sample(m, y, x) {
  // Bilinear, pixel centres aligned (align_corners=False), edges clamped.
  const h = ex.h, w = ex.w;
  const fy = Math.min(Math.max(y - 0.5, 0), h - 1), fx = Math.min(Math.max(x - 0.5, 0), w - 1);
  const y0 = Math.floor(fy), x0 = Math.floor(fx);
  const y1 = Math.min(y0 + 1, h - 1), x1 = Math.min(x0 + 1, w - 1), dy = fy - y0, dx = fx - x0;
  const v = (r, c) => m[r * w + c];
  const top = v(y0, x0) * (1 - dx) + v(y0, x1) * dx, bottom = v(y1, x0) * (1 - dx) + v(y1, x1) * dx;
  return top * (1 - dy) + bottom * dy;
}
function draw(i) {
  const ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
  ctx.clearRect(0, 0, W, H);
  const n = ex.h * ex.w, m = maps.subarray(i * n, (i + 1) * n);
  let top = 0; for (const v of m) top = Math.max(top, v);
  if (show.checked) {
    const img = ctx.createImageData(W, H), a = Math.round(255 * DATA.alpha);
    for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
      const v = sample(m, (y + 0.5) * ex.h / H, (x + 0.5) * ex.w / W);
      const c = lutRgb(LUT, top > 0 ? v / top : 0), o = 4 * (y * W + x);
      img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = a;
    }
    ctx.putImageData(img, 0, 0);
  }
  document.getElementById("bar").replaceChildren(
    colorbar(LUT, "0 (not looked at)", fmt(top) + " (this word's peak)"));
  return top;
}
function select(i) {
  step.value = i;
  buttons.forEach((b, k) => b.setAttribute("aria-pressed", k === i ? "true" : "false"));
  const top = draw(i);
  document.getElementById("readout").textContent = "Word " + (i + 1) + " of " + ex.words.length
    + ": \u201c" + ex.words[i] + "\u201d (" + methSel.value + ", peak " + fmt(top) + ")";
}
DATA.images.forEach((e, k) => option(imgSel, k, (k + 1) + ": " + e.words.join(" ").slice(0, 60)));
document.getElementById("image-box").hidden = DATA.images.length < 2;
imgSel.addEventListener("change", build);
step.addEventListener("input", () => select(Number(step.value)));
show.addEventListener("change", () => select(Number(step.value)));
methSel.addEventListener("change", () => { pickMethod(); select(Number(step.value)); });
build();
"""

# The policy source of this page's script: a page that shows it in a frame (the live page of
# `attnkit serve`) lists it in its own policy, which the frame inherits.
SCRIPT_SOURCE = script_source(_JS)
