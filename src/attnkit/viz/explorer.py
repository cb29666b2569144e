"""The shell shared by the attention explorer pages: one self-contained, script-safe HTML file.

A page is: a title, a two-line "how to read this" legend, a run summary box (model and data, from
the caller's dict), the app's controls and views, and one inline script. The app's numbers and
every user string travel in a ``<script type="application/json">`` block (with ``<``, ``>`` and
``&`` escaped, so a review containing ``</script>`` cannot close it) and the script builds the DOM
with ``textContent`` only. A Content-Security-Policy allows nothing but the page's own script (by
its SHA-256) and ``data:`` images: no network, no injected handler (``onerror=``) can run.

The per-app builders live in `attnkit.viz.translation_page`,
`attnkit.viz.sentiment_page` and `attnkit.viz.caption_page`.

Example:
    >>> html_text = explorer_page("Sentiment", ("line 1", "line 2"), {"model": "bilstm"},
    ...                           body="<div id='app'></div>", data={"x": 1}, script="", css="")
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from attnkit.fileio import atomic_write_text
from attnkit.viz._save import to_numpy
from attnkit.viz.palettes import lut_hex

_CSS = """
:root { --ink: #1d1d1f; --muted: #555; --line: #d8d8de; --accent: #0b57d0; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       margin: 0 auto; padding: 1em 1.5em 3em; max-width: 1200px; line-height: 1.45; }
h1 { font-size: 1.5em; margin: .2em 0 .4em; }
.legend { background: #f3f6fb; border-left: 4px solid var(--accent); padding: .5em .9em;
          margin: 0 0 .8em; }
.legend p { margin: .15em 0; }
.summary { border: 1px solid var(--line); border-radius: 6px; padding: .4em .9em;
           margin: 0 0 1em; font-size: .92em; }
.summary dl { display: grid; grid-template-columns: max-content 1fr; gap: .1em 1em; margin: 0; }
.summary dt { color: var(--muted); }
.summary dd { margin: 0; overflow-wrap: anywhere; }
.controls { display: flex; flex-wrap: wrap; gap: .6em 1.2em; align-items: center;
            margin: .6em 0 1em; }
.controls label { font-weight: 600; }
select, button, input { font: inherit; }
select, button { padding: .2em .5em; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.colorbar { display: inline-flex; align-items: center; gap: .5em; font-size: .9em;
            color: var(--muted); margin: .4em 0; }
.colorbar .ramp { width: 220px; height: 14px; border: 1px solid #999; border-radius: 2px; }
table.metrics { border-collapse: collapse; margin: .5em 0; }
table.metrics caption { text-align: left; color: var(--muted); font-size: .9em; }
table.metrics th, table.metrics td { border: 1px solid var(--line); padding: .2em .6em;
                                     text-align: left; }
.tok { border-radius: 3px; padding: 0 2px; cursor: default; }
.muted { color: var(--muted); }
"""

# Helpers every page script uses; the app script follows them.
_SHARED_JS = r"""
const DATA = JSON.parse(document.getElementById("attnkit-data").textContent);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function decodeWeights(enc) {
  const bin = atob(enc.b64), out = new Float32Array(bin.length / 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = (bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) / 65535 * enc.scale;
  }
  return out;
}
function lutRgb(lut, t) {
  const n = lut.length / 6;
  const k = Math.max(0, Math.min(n - 1, Math.round((Number.isFinite(t) ? t : 0) * (n - 1))));
  const h = lut.substr(6 * k, 6);
  return [parseInt(h.substr(0, 2), 16), parseInt(h.substr(2, 2), 16), parseInt(h.substr(4, 2), 16)];
}
function paint(node, lut, t) {
  const c = lutRgb(lut, t);
  node.style.backgroundColor = "rgb(" + c.join(",") + ")";
  node.style.color = (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) < 128 ? "#fff" : "#000";
}
function unpaint(node) { node.style.backgroundColor = ""; node.style.color = ""; }
function rampCss(lut) {
  const n = lut.length / 6, stops = [];
  for (let k = 0; k < n; k += 8) stops.push("#" + lut.substr(6 * k, 6));
  stops.push("#" + lut.substr(6 * (n - 1), 6));
  return "linear-gradient(to right," + stops.join(",") + ")";
}
function colorbar(lut, left, right) {
  const bar = el("div", "colorbar");
  const lo = el("span", "lo", left), ramp = el("span", "ramp"), hi = el("span", "hi", right);
  ramp.style.background = rampCss(lut);
  bar.append(lo, ramp, hi);
  return bar;
}
function fmt(x) { return Math.abs(x) >= 0.01 || x === 0 ? x.toFixed(3) : x.toExponential(1); }
function option(sel, value, text) { const o = el("option", null, text); o.value = value;
  sel.append(o); }
// An example's methods: the given order first (best measured first: the page opens on it),
// then attention and the rest; the one picked stays picked if the example has it.
function fillMethods(sel, order, methods) {
  const keep = sel.value;
  sel.replaceChildren();
  const names = [...new Set([...order, "attention", ...Object.keys(methods)])]
    .filter((m) => m === "attention" || methods[m]);
  for (const name of names) option(sel, name, name);
  sel.value = keep && names.includes(keep) ? keep : names[0];
  document.getElementById("method-box").hidden = Object.keys(methods).length < 1;
}
"""


def json_for_script(obj) -> str:
    """``obj`` as JSON safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` can only occur inside JSON strings, where their ``\\uXXXX`` escapes
    mean the same characters to ``JSON.parse`` but can never close the script element.

    Raises:
        ValueError: ``obj`` holds NaN or infinity (not JSON).
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def encode_weights(values, name: str = "weights") -> dict:
    """Non-negative weights as ``{"b64": little-endian uint16 / 65535 of v / scale, "scale"}``.

    Two bytes a weight (about 2.7 characters of base64) instead of ~7 for a JSON number keeps a
    many-head page small; the step is ``scale / 65535``, far below what a colour can show.

    Raises:
        ValueError: NaN, infinity or a negative value.
    """
    w = to_numpy(values, name).astype(np.float64).ravel()
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} contain NaN or infinity")
    if w.size and w.min() < 0:
        raise ValueError(f"{name} must be >= 0 (attention weights), got min {w.min():.4g}")
    scale = float(w.max()) if w.size and w.max() > 0 else 1.0
    q = np.rint(w / scale * 65535.0).astype("<u2")
    return {"b64": base64.b64encode(q.tobytes()).decode("ascii"), "scale": scale}


def _shown(value: object) -> str:
    """A summary value as a reader wants it: whole numbers with thousands separators, other
    numbers to 4 significant digits (no float noise), a mapping as ``key: value`` pairs."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "-"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_shown(v)}" for k, v in value.items())
    return value if isinstance(value, str) else json.dumps(value, default=str)


def summary_html(summary: Mapping[str, object] | None) -> str:
    """The run summary box: each key and value escaped (see `_shown` for the formatting)."""
    if not summary:
        return ""
    rows = []
    for key, value in summary.items():
        rows.append(f"<dt>{html.escape(str(key))}</dt><dd>{html.escape(_shown(value))}</dd>")
    return ('<section class="summary" aria-label="run summary"><dl>' + "".join(rows)
            + "</dl></section>")


def palette_data(*names: str) -> dict[str, str]:
    """The LUTs a page script needs, by palette name."""
    return {n: lut_hex(n) for n in names}


def script_source(script: str) -> str:
    """The Content-Security-Policy source (``'sha256-...'``) that lets a page built with the
    app script ``script`` run it: a page that shows such pages in frames lists it too."""
    js = _SHARED_JS + script
    return "'sha256-" + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode(
        "ascii") + "'"


def explorer_page(title: str, legend: tuple[str, ...], summary: Mapping[str, object] | None, *,
                  body: str, data: object, script: str, css: str,
                  csp: Mapping[str, Sequence[str]] | None = None,
                  path: str | os.PathLike | None = None) -> str:
    """Assemble one self-contained page.

    Args:
        title: page title and heading (escaped).
        legend: plain-text sentences saying how to read the page (escaped), one a paragraph.
        summary: model and data facts shown in a box (keys and values escaped).
        body: the app's static, trusted HTML skeleton (no user strings in it).
        data: JSON-able app data, read by the script as ``DATA``.
        script: the app's JavaScript, run after the shared helpers.
        css: the app's extra CSS.
        csp: sources added to the page's policy, by directive (a page served by a server
            that fetches from it: ``{"connect-src": ["'self'"]}``); None: the page reaches
            nothing.
        path: also write the page there (`finish_page`).

    Returns:
        The HTML text.
    """
    js = _SHARED_JS + script
    policy = {"default-src": ["'none'"], "script-src": [script_source(script)],
              "style-src": ["'unsafe-inline'"], "img-src": ["data:"], "base-uri": ["'none'"],
              "form-action": ["'none'"]}
    for directive, sources in (csp or {}).items():
        policy.setdefault(directive, []).extend(s for s in sources
                                                if s not in policy[directive])
    csp = "; ".join(f"{k} {' '.join(v)}" for k, v in policy.items())
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in legend)
    t = html.escape(str(title))
    return finish_page(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{t}</title>\n<style>{_CSS}{css}</style>\n</head>\n<body>\n<h1>{t}</h1>\n"
        f"<section class=\"legend\" aria-label=\"how to read this\">{lines}</section>\n"
        f"{summary_html(summary)}\n{body}\n"
        f"<script type=\"application/json\" id=\"attnkit-data\">{json_for_script(data)}</script>\n"
        f"<script>{js}</script>\n</body>\n</html>\n", path)


def coerce(item: object, cls: type, what: str) -> object:
    """``item`` as a ``cls`` (a dataclass): itself, or built from a dict of its fields.

    Raises:
        ValueError: neither, or a dict with fields ``cls`` does not take (``what`` names it).
    """
    if isinstance(item, cls):
        return item
    if isinstance(item, Mapping):
        try:
            return cls(**item)
        except TypeError as err:
            raise ValueError(f"{what}: {err}") from err
    raise ValueError(f"{what} must be a {cls.__name__} or a dict, got {type(item).__name__}")


def finish_page(text: str, path: str | os.PathLike | None) -> str:
    """Write ``text`` atomically to ``path`` when given; return it either way."""
    if path is not None:
        atomic_write_text(Path(path), text)
    return text
