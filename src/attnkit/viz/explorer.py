"""The shell shared by the attention explorer pages: one self-contained, script-safe HTML file.

A page (``explorer.html``) is a title, a "how to read this" legend, a run summary box, the app's
controls and views, its data as a JSON block and one script allowed by its hash (``explorer.js``
then the app's). The per-app builders: `attnkit.viz.translation_page`, `sentiment_page`,
`caption_page`; why the page is built this way: docs/concepts.md ("Explorer pages").
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from string import Template

import numpy as np

from attnkit.fileio import atomic_write_text
from attnkit.viz._save import to_numpy
from attnkit.viz.palettes import lut_hex


def page_file(name: str, package: str = __package__) -> str:
    """The text of ``name``, a page file shipped beside the modules of ``package``."""
    return files(package).joinpath(name).read_text(encoding="utf-8")


SHELL, SHARED_JS = Template(page_file("explorer.html")), page_file("explorer.js")


def app_files(name: str) -> dict[str, str]:
    """An app page's ``<name>.html``, ``.css`` and ``.js``, as `explorer_page`'s ``body``,
    ``css`` and ``script``."""
    return {key: page_file(f"{name}.{ext}") for key, ext in (("body", "html"), ("css", "css"),
                                                               ("script", "js"))}


def json_for_script(obj) -> str:
    """``obj`` as JSON that no string in it can end the page's data block: ``<``, ``>`` and ``&``
    as ``\\uXXXX`` escapes (the same characters to ``JSON.parse``).

    Raises:
        ValueError: ``obj`` holds NaN or infinity (not JSON).
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def encode_weights(values, name: str = "weights") -> dict:
    """Non-negative weights as ``{"b64": little-endian uint16 of v / scale * 65535, "scale"}``:
    two bytes a weight instead of ~7 for a JSON number; ValueError for NaN, inf or negatives.
    """
    w = to_numpy(values, name).astype(np.float64).ravel()
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} contain NaN or infinity")
    if w.size and w.min() < 0:
        raise ValueError(f"{name} must be >= 0 (attention weights), got min {w.min():.4g}")
    scale = float(w.max()) if w.size and w.max() > 0 else 1.0
    q = np.rint(w / scale * 65535.0).astype("<u2")
    return {"b64": base64.b64encode(q.tobytes()).decode("ascii"), "scale": scale}


def encode_methods(methods: Mapping[str, object], shape: tuple[int, ...], where: str) -> dict:
    """Other explanations by name, each checked to be shaped ``shape``, as `encode_weights`."""
    out = {}
    for name, values in dict(methods).items():
        m = to_numpy(values, f"{where}: method {name}")
        if m.shape != shape:
            raise ValueError(f"{where}: method {name!r} must be shaped {list(shape)}, "
                             f"got {list(m.shape)}")
        out[str(name)] = encode_weights(m, f"{where}: method {name}")
    return out


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
    rows = "".join(f"<dt>{html.escape(str(key))}</dt><dd>{html.escape(_shown(value))}</dd>"
                   for key, value in summary.items())
    return f'<section class="summary" aria-label="run summary"><dl>{rows}</dl></section>'


def palette_data(*names: str) -> dict[str, str]:
    """The LUTs a page script needs, by palette name."""
    return {n: lut_hex(n) for n in names}


def script_source(script: str) -> str:
    """The Content-Security-Policy source (``'sha256-...'``) that lets a page built with the
    app script ``script`` run it: a page that shows such pages in frames lists it too."""
    digest = hashlib.sha256(_page_script(script).encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def explorer_page(title: str, legend: tuple[str, ...], summary: Mapping[str, object] | None, *,
                  body: str, data: object, script: str, css: str,
                  csp: Mapping[str, Sequence[str]] | None = None,
                  path: str | os.PathLike | None = None) -> str:
    """Assemble one self-contained page and return its HTML (also written to ``path`` if given).

    Args:
        title, legend, summary: heading, how-to-read sentences and facts box (all escaped).
        body: the app's static, trusted HTML skeleton (no user strings in it).
        data: JSON-able app data, read by the script as ``DATA``.
        script, css: the app's JavaScript (run after the shared helpers) and extra CSS.
        csp: sources added to the page's policy, by directive (e.g. ``{"connect-src":
            ["'self'"]}``); None: the page reaches nothing.
    """
    policy = {"default-src": ["'none'"], "script-src": [script_source(script)],
              "style-src": ["'unsafe-inline'"], "img-src": ["data:"], "base-uri": ["'none'"],
              "form-action": ["'none'"]}
    for directive, sources in (csp or {}).items():
        policy.setdefault(directive, []).extend(s for s in sources
                                                if s not in policy[directive])
    page = SHELL.substitute(
        csp="; ".join(f"{k} {' '.join(v)}" for k, v in policy.items()),
        title=html.escape(str(title)), css=css, body=body, summary=summary_html(summary),
        legend="".join(f"<p>{html.escape(line)}</p>" for line in legend),
        data=json_for_script(data), js=_page_script(script))
    if path is not None:
        atomic_write_text(Path(path), page)
    return page


def _page_script(script: str) -> str:
    """The page's one script: the shared helpers, then the app's."""
    return f"\n{SHARED_JS}\n{script}"


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
