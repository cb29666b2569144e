"""What every app's ``predict`` returns: an output with its attention, able to render itself.

Each app subclasses :class:`Prediction` (a translation, a review's sentiment, an image's
caption) and implements three things: ``to_dict`` (JSON-ready, the weights included),
``figure`` (a static matplotlib figure) and the class method ``page`` (one self-contained HTML
page for a list of predictions of that app). :meth:`Prediction.render` and
:func:`write_page` choose the format by the file's extension.

Example::

    preds = predict("runs/fr", ["I am cold."])
    preds[0].weights.shape            # [target_len, source_len]
    preds[0].render("cold.png")       # or .svg / .pdf / .html
    write_page(preds, "cold.html", run.summary())
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnkit.errors import UsageError
from attnkit.fileio import atomic_write_text

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


class Prediction:
    """Base class of the apps' predictions. Subclasses are dataclasses with a ``weights`` field
    (a numpy array of attention weights; its shape is the app's, stated in its docstring)."""

    weights: np.ndarray | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (weights as nested lists)."""
        raise NotImplementedError

    def figure(self):
        """A static matplotlib ``Figure`` of the attention (saved by :meth:`render`)."""
        raise NotImplementedError

    @classmethod
    def page(cls, predictions: Sequence[Prediction], summary: dict[str, Any]) -> str:
        """One self-contained HTML page showing ``predictions`` (the app's explorer)."""
        raise NotImplementedError

    def render(self, path: str | os.PathLike, summary: dict[str, Any] | None = None) -> Path:
        """Write this prediction's attention to ``path``: a figure (``.png/.svg/.pdf``) or a
        page (``.html``), atomically.

        Raises:
            UsageError: an extension that is none of these.
        """
        path = Path(path)
        if path.suffix.lower() == ".html":
            return write_page([self], path, summary or {})
        if path.suffix.lower() not in FIGURE_SUFFIXES:
            raise UsageError(f"{path}: cannot write a {path.suffix or 'suffix-less'} file; use "
                             ".png, .svg, .pdf or .html")
        from attnkit.viz._save import save_figure

        return save_figure(self.figure(), [path])[0]


def write_page(predictions: Sequence[Prediction], path: str | os.PathLike,
               summary: dict[str, Any]) -> Path:
    """Write one HTML page for ``predictions`` (all of one app) to ``path``, atomically."""
    if not predictions:
        raise UsageError("nothing to show: no predictions")
    return atomic_write_text(path, type(predictions[0]).page(predictions, summary))
