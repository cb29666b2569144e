"""Figure plumbing shared by the viz modules: array coercion and atomic saving.

Figures are built with ``matplotlib.figure.Figure`` directly (never ``pyplot``), so nothing here
touches the user's global backend or pyplot state.
"""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from attnkit.fileio import atomic_write_bytes

# Formats we write by file extension; matplotlib picks the renderer from ``format=``.
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def to_numpy(x, name: str) -> np.ndarray:
    """A CPU tensor or array-like as a numpy array (tensors are detached, moved to the CPU)."""
    if hasattr(x, "detach"):  # torch.Tensor without importing torch into viz
        x = x.detach().cpu().float().numpy() if x.is_floating_point() else x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array or tensor, got {type(x).__name__}") from err


def as_paths(path_or_paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """One path or several as a list of Paths whose extensions we can write."""
    one = isinstance(path_or_paths, (str, os.PathLike))
    paths = [Path(p) for p in ([path_or_paths] if one else path_or_paths)]
    if not paths:
        raise ValueError("no output path given")
    for p in paths:
        if p.suffix.lower() not in FORMATS:
            raise ValueError(f"{p}: unsupported figure extension {p.suffix!r}; "
                             f"use one of {sorted(FORMATS)}")
    return paths


def figure_bytes(fig: Figure, fmt: str, dpi: int = 100) -> bytes:
    """Render ``fig`` in ``fmt`` ("png", "svg", "pdf"). SVG keeps text as ``<text>`` elements."""
    import matplotlib

    buf = io.BytesIO()
    # "none" keeps labels as real text in SVG (searchable, smaller); rc_context restores the
    # user's settings afterwards.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def save_figure(fig: Figure, paths: list[Path], dpi: int = 100) -> list[Path]:
    """Write ``fig`` to every path (format from the extension), each atomically."""
    return [atomic_write_bytes(p, figure_bytes(fig, FORMATS[p.suffix.lower()], dpi)) for p in paths]


def png_data_uri(image: np.ndarray | bytes, max_side: int | None = None) -> str:
    """A uint8 image (or PNG bytes) as a base64 PNG data URI; an image with a side over
    ``max_side`` is shrunk first (bicubic)."""
    if not isinstance(image, bytes):
        pil = Image.fromarray(image)
        if max_side is not None and max(pil.size) > max_side:
            k = max_side / max(pil.size)
            pil = pil.resize((max(1, round(pil.width * k)), max(1, round(pil.height * k))),
                             Image.Resampling.BICUBIC)
        buf = io.BytesIO()
        pil.save(buf, format="PNG", optimize=max_side is not None)
        image = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(image).decode("ascii")
