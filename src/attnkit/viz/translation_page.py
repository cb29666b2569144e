"""The translation attention explorer: which source words each output word looked at.

``translation_page(examples, summary, path)`` writes one self-contained HTML page: an example
picker, a method selector (attention, or another explanation the examples carry: attention
rollout, gradient x input, integrated gradients; hidden when there is only attention), a layer
and head selector for attention ("average of heads" by default; hidden for a one-head RNN),
the source and output sentences as words to hover or Tab to (the partner words are shaded by
weight, both ways, and words linked by the example's word alignment are outlined), and the
matrix in a scrolling box with sticky word labels, so a 200-word sentence stays a readable page
rather than a 6000-pixel picture.

Example:
    >>> ex = TranslationExample(["le", "chat"], ["the", "cat"], np.eye(2))
    >>> page = translation_page([ex], {"model": "rnn"}, "translate.html")
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnkit.viz._save import to_numpy
from attnkit.viz.explorer import (
    coerce,
    encode_weights,
    explorer_page,
    palette_data,
    script_source,
)
from attnkit.viz.palettes import WEIGHTS


@dataclass(frozen=True)
class TranslationExample:
    """One translated sentence and its attention.

    Args:
        source_tokens: ``T_src`` strings.
        target_tokens: ``T_tgt`` strings (the output).
        attention: ``[layers, heads, T_tgt, T_src]`` (Transformer cross-attention),
            ``[heads, T_tgt, T_src]`` or ``[T_tgt, T_src]`` (an RNN: no selector shown).
        references: reference translations, shown under the output.
        scores: per-sentence figures (e.g. ``{"chrF": 61.2}``), shown as a small table.
        methods: other explanations, by name (``"integrated-gradients"``), each
            ``[T_tgt, T_src]`` weights >= 0: the method selector offers them beside attention.
        links: word alignment links ``(source index, target index)``: hovering a word outlines
            the words it is linked to.
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
        raise ValueError(
            f"example {k}: attention must be [layers, heads, T_tgt, T_src], [heads, T_tgt, T_src] "
            f"or [T_tgt, T_src] with T_tgt = {t} target tokens and T_src = {s} source tokens, "
            f"got {list(w.shape)}")
    if t == 0 or s == 0:
        raise ValueError(f"example {k}: needs at least one source and one target token")
    w4 = w.reshape((1,) * (4 - w.ndim) + w.shape)
    methods = {}
    for name, values in dict(ex.methods).items():
        m = to_numpy(values, f"example {k}: method {name}")
        if m.shape != (t, s):
            raise ValueError(f"example {k}: method {name!r} must be [T_tgt, T_src] = "
                             f"[{t}, {s}], got {list(m.shape)}")
        methods[str(name)] = encode_weights(m, f"example {k}: method {name}")
    links = []
    for i, j in ex.links:
        if not (0 <= int(i) < s and 0 <= int(j) < t):
            raise ValueError(f"example {k}: link {i}-{j} names a token beyond the sentence "
                             f"({s} source, {t} target tokens)")
        links.append([int(i), int(j)])
    return {"methods": methods, "links": links,
            "src": [str(x) for x in ex.source_tokens], "tgt": [str(x) for x in ex.target_tokens],
            "L": int(w4.shape[0]), "H": int(w4.shape[1]), "T": t, "S": s,
            "w": encode_weights(w4, f"example {k}: attention"),
            "refs": [str(r) for r in ex.references],
            "scores": [[str(a), str(b)] for a, b in dict(ex.scores).items()]}


def translation_page(
    examples: Sequence[TranslationExample | Mapping],
    summary: Mapping[str, object] | None,
    path: str | os.PathLike | None = None,
    *,
    title: str = "Translation: where the model looked",
    metrics: Mapping[str, object] | None = None,
    order: Sequence[str] = (),
    note: str | None = None,
) -> str:
    """Build (and optionally write, atomically) the translation explorer page.

    Args:
        examples: `TranslationExample` items (or dicts with the same keys).
        summary: model and data facts for the summary box, e.g. ``{"model": ..., "data": ...}``.
        path: where to write the page; None only returns it.
        title: page heading.
        metrics: run-level figures (e.g. ``{"BLEU": 27.1}``) shown as a table.
        order: the method picker's order (``"attention"`` and the examples' method names);
            the page opens on the first a sentence carries. Empty: attention first.
        note: one more sentence under the legend (which method the page opens on, and why).

    Returns:
        The HTML text.

    Raises:
        ValueError: no example, or an attention shape that does not match its tokens.
    """
    if not examples:
        raise ValueError("translation_page needs at least one example")
    examples = [coerce(e, TranslationExample, f"translation example {k}")
                for k, e in enumerate(examples)]
    data = {"examples": [_example_data(e, k) for k, e in enumerate(examples)],
            "metrics": [[str(a), str(b)] for a, b in dict(metrics or {}).items()],
            "palettes": palette_data(WEIGHTS), "seq": WEIGHTS, "order": [str(m) for m in order]}
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
    return explorer_page(title, legend, summary, body=_BODY, data=data, script=_JS, css=_CSS,
                         path=path)


_BODY = """
<div id="run-metrics"></div>
<div class="controls">
  <span id="example-box"><label for="example">Sentence</label> <select id="example"></select></span>
  <span id="method-box"><label for="method">Method</label> <select id="method"></select></span>
  <span id="layer-box"><label for="layer">Layer</label> <select id="layer"></select></span>
  <span id="head-box"><label for="head">Head</label> <select id="head"></select></span>
</div>
<div class="sentences">
  <p><span class="role">Source</span> <span id="src-line" class="line"></span></p>
  <p><span class="role">Output</span> <span id="tgt-line" class="line"></span></p>
  <div id="refs"></div>
  <p id="readout" class="muted" aria-live="polite">Hover over or Tab to a word.</p>
</div>
<div id="scores"></div>
<div id="bar"></div>
<div class="matrix-wrap" tabindex="0" aria-label="alignment grid (scrolls)">
  <table id="matrix"></table>
</div>
"""

_CSS = """
.role { display: inline-block; width: 6.5em; font-weight: 600; color: var(--muted); }
.line .tok { margin-right: .25em; line-height: 1.9; }
.tok.active { outline: 2px solid var(--accent); }
.tok.linked { outline: 2px dashed #c2410c; outline-offset: 1px; }
#matrix th.active { box-shadow: inset 0 0 0 2px var(--accent); }
#matrix td.link { box-shadow: inset 0 0 0 2px #c2410c; }
.matrix-wrap { max-height: 70vh; width: fit-content; max-width: 100%; overflow: auto;
               border: 1px solid var(--line); margin-top: .4em; }
#matrix { border-collapse: separate; border-spacing: 0; font-size: 12px; }
#matrix td { width: 22px; min-width: 22px; height: 22px; padding: 0;
             border-right: 1px solid #fff; border-bottom: 1px solid #fff; }
#matrix th { background: #fff; font-weight: normal; white-space: nowrap; padding: 0 4px; }
#matrix thead th { position: sticky; top: 0; z-index: 2; vertical-align: bottom; }
#matrix thead th.col { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 9em;
                       overflow: hidden; text-overflow: ellipsis; padding: 4px 0; }
#matrix th.row { position: sticky; left: 0; z-index: 1; text-align: right; max-width: 12em;
                 overflow: hidden; text-overflow: ellipsis; }
#matrix thead th.corner { left: 0; z-index: 3; }
#refs p { margin: .1em 0; }
"""

_JS = r"""
const LUT = DATA.palettes[DATA.seq];
const exSel = document.getElementById("example");
const laySel = document.getElementById("layer"), headSel = document.getElementById("head");
const methSel = document.getElementById("method");
const readout = document.getElementById("readout");
let ex = null, w = null, m = null, ui = null;

function table(rows, id, caption) {
  const box = document.getElementById(id); box.replaceChildren();
  if (!rows.length) return;
  const t = el("table", "metrics");
  t.append(el("caption", null, caption));
  for (const r of rows) {
    const tr = el("tr");
    tr.append(el("th", null, r[0]), el("td", null, r[1]));
    t.append(tr);
  }
  box.append(t);
}
function current() {
  if (methSel.value !== "attention") return decodeWeights(ex.methods[methSel.value]);
  const T = ex.T, S = ex.S, H = ex.H, off = Number(laySel.value) * H * T * S;
  const out = new Float32Array(T * S);
  if (headSel.value === "avg") {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < T * S; i++) out[i] += w[off + h * T * S + i] / H;
    }
  } else {
    const o = off + Number(headSel.value) * T * S;
    for (let i = 0; i < T * S; i++) out[i] = w[o + i];
  }
  return out;
}
function chip(text, role, i) {
  const c = el("span", "tok", text);
  c.tabIndex = 0; c.dataset.role = role; c.dataset.i = i;
  return c;
}
function hookWord(node, role, i) {
  node.addEventListener("mouseenter", () => highlight(role, i));
  node.addEventListener("focus", () => highlight(role, i));
  node.addEventListener("mouseleave", clear);
  node.addEventListener("blur", clear);
  node.addEventListener("keydown", (ev) => {
    const step = ev.key === "ArrowRight" || ev.key === "ArrowDown" ? 1
      : ev.key === "ArrowLeft" || ev.key === "ArrowUp" ? -1 : 0;
    const list = role === "tgt" ? ui.tgt : ui.src;
    if (step && list[i + step]) { ev.preventDefault(); list[i + step].focus(); }
  });
}
function build() {
  ex = DATA.examples[Number(exSel.value)];
  w = decodeWeights(ex.w);
  laySel.replaceChildren(); headSel.replaceChildren();
  for (let l = 0; l < ex.L; l++) {
    option(laySel, l, "layer " + (l + 1) + (l === ex.L - 1 ? " (last)" : ""));
  }
  laySel.value = ex.L - 1;
  option(headSel, "avg", "average of " + ex.H + " heads");
  for (let h = 0; h < ex.H; h++) option(headSel, h, "head " + (h + 1));
  fillMethods(methSel, DATA.order, ex.methods);
  showSelectors();
  ui = {src: [], tgt: [], rows: [], cols: [], cells: []};
  const sl = document.getElementById("src-line"), tl = document.getElementById("tgt-line");
  sl.replaceChildren(); tl.replaceChildren();
  ex.src.forEach((s, j) => { const c = chip(s, "src", j); ui.src.push(c); sl.append(c, " "); });
  ex.tgt.forEach((s, i) => { const c = chip(s, "tgt", i); ui.tgt.push(c); tl.append(c, " "); });
  const refs = document.getElementById("refs"); refs.replaceChildren();
  for (const r of ex.refs) {
    const p = el("p");
    p.append(el("span", "role", "Reference"), el("span", null, r));
    refs.append(p);
  }
  table(ex.scores, "scores", "this sentence");
  buildMatrix();
  ui.src.forEach((c, j) => hookWord(c, "src", j));
  ui.tgt.forEach((c, i) => hookWord(c, "tgt", i));
  ui.cols.forEach((c, j) => hookWord(c, "src", j));
  ui.rows.forEach((c, i) => hookWord(c, "tgt", i));
  recolor();
}
function buildMatrix() {
  const t = document.getElementById("matrix"); t.replaceChildren();
  const head = el("thead"), hr = el("tr"), corner = el("th", "corner", "output \\ source");
  hr.append(corner);
  ex.src.forEach((s, j) => { const th = el("th", "col", s); th.tabIndex = 0; th.scope = "col";
    ui.cols.push(th); hr.append(th); });
  head.append(hr); t.append(head);
  const body = el("tbody");
  ex.tgt.forEach((s, i) => {
    const tr = el("tr"), th = el("th", "row", s); th.tabIndex = 0; th.scope = "row";
    ui.rows.push(th); tr.append(th);
    for (let j = 0; j < ex.S; j++) { const td = el("td"); ui.cells.push(td); tr.append(td); }
    body.append(tr);
  });
  t.append(body);
  for (const [j, i] of ex.links) ui.cells[i * ex.S + j].classList.add("link");
}
function showSelectors() {
  const att = methSel.value === "attention";
  document.getElementById("layer-box").hidden = !att || ex.L < 2;
  document.getElementById("head-box").hidden = !att || ex.H < 2;
}
function recolor() {
  showSelectors();
  m = current();
  let top = 0; for (const v of m) top = Math.max(top, v);
  const scale = top > 0 ? top : 1;
  ui.cells.forEach((td, k) => {
    paint(td, LUT, m[k] / scale);
    td.title = ex.tgt[Math.floor(k / ex.S)] + " \u2190 " + ex.src[k % ex.S] + ": " + fmt(m[k]);
  });
  document.getElementById("bar").replaceChildren(
    colorbar(LUT, "0 (ignored)", fmt(top) + " (most looked at)"));
}
function clear() {
  for (const n of [...ui.src, ...ui.tgt, ...ui.rows, ...ui.cols]) {
    unpaint(n);
    n.classList.remove("active", "linked");
  }
  readout.textContent = "Hover over or Tab to a word.";
}
function highlight(role, idx) {
  clear();
  const T = ex.T, S = ex.S, partners = role === "tgt" ? ui.src : ui.tgt;
  const edge = role === "tgt" ? ui.cols : ui.rows, names = role === "tgt" ? ex.src : ex.tgt;
  const vals = [];
  for (let k = 0; k < (role === "tgt" ? S : T); k++) {
    vals.push(role === "tgt" ? m[idx * S + k] : m[k * S + idx]);
  }
  const top = Math.max(...vals) || 1;
  vals.forEach((v, k) => { paint(partners[k], LUT, v / top); paint(edge[k], LUT, v / top); });
  (role === "tgt" ? [ui.tgt[idx], ui.rows[idx]] : [ui.src[idx], ui.cols[idx]])
    .forEach((n) => n.classList.add("active"));
  const best = vals.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  const word = role === "tgt" ? ex.tgt[idx] : ex.src[idx];
  const linked = ex.links.filter((l) => (role === "tgt" ? l[1] : l[0]) === idx)
    .map((l) => (role === "tgt" ? l[0] : l[1]));
  linked.forEach((k) => { partners[k].classList.add("linked"); edge[k].classList.add("linked"); });
  readout.textContent = (role === "tgt" ? "\u201c" + word + "\u201d looked most at: "
    : "\u201c" + word + "\u201d was looked at most by: ")
    + best.map(([v, k]) => names[k] + " (" + fmt(v) + ")").join(", ")
    + (ex.links.length ? "; aligned with: " + (linked.length
      ? linked.map((k) => names[k]).join(", ") : "nothing") : "");
}
DATA.examples.forEach((e, k) => option(exSel, k, (k + 1) + ": " + e.src.slice(0, 8).join(" ")
  + (e.src.length > 8 ? " \u2026" : "")));
document.getElementById("example-box").hidden = DATA.examples.length < 2;
table(DATA.metrics, "run-metrics", "whole test set");
exSel.addEventListener("change", build);
laySel.addEventListener("change", recolor);
methSel.addEventListener("change", recolor);
headSel.addEventListener("change", recolor);
build();
"""

# The policy source of this page's script: a page that shows it in a frame (the live page of
# `attnkit serve`) lists it in its own policy, which the frame inherits.
SCRIPT_SOURCE = script_source(_JS)
