"""What every app's ``predict`` returns: an output with its attention, able to render itself
(`Prediction`: ``to_dict``, ``text_line``, ``figure``, ``page``; `write_page`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnkit.apps.outputs import FIGURE, FIGURE_OR_PAGE, PAGE, output_file, write_output, writing
from attnkit.errors import UsageError


def rounded(array, digits: int) -> list | None:
    """``array`` as nested lists rounded to ``digits`` decimals, for JSON (None stays None).
    Rounded in float64: a float32 rounded to 4 decimals still prints as 0.2206999957561493."""
    return None if array is None else np.round(np.asarray(array, np.float64), digits).tolist()


class Prediction:
    """Base class of the apps' predictions. Subclasses are dataclasses with a ``weights`` field
    (a numpy array of attention weights, one distribution over the input per output; its shape
    is the app's, stated in its docstring)."""

    weights: np.ndarray | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (weights as nested lists)."""
        raise NotImplementedError

    def text_line(self, **show: Any) -> str:
        """What the ``predict`` command prints for it (``show``: the app's display options,
        e.g. ``color=True``)."""
        raise NotImplementedError

    def note(self) -> str | None:
        """One line on what the model could not read or see, or None."""

    def warning(self) -> str | None:
        """One line when the model could not read enough of the input for its output to be
        trusted (``predict`` prints it as ``attnkit: warning:``), or None."""

    def figure(self):
        """A static matplotlib ``Figure`` of the attention (saved by `render`)."""
        raise NotImplementedError

    @classmethod
    def page(cls, predictions: Sequence[Prediction], summary: dict[str, Any]) -> str:
        """One self-contained HTML page showing ``predictions`` (the app's explorer)."""
        raise NotImplementedError

    def render(self, path: str | os.PathLike, summary: dict[str, Any] | None = None, *,
               run: str | os.PathLike | None = None) -> Path:
        """Write the attention to ``path`` atomically: a figure (``.png/.svg/.pdf``) or a page
        (``.html``); ``run`` as `attnkit.apps.outputs.output_file`. UsageError: another
        extension, or a file that is not such an output.
        """
        path = output_file(path, FIGURE_OR_PAGE, run=run)
        if path.suffix.lower() in PAGE.suffixes:
            return write_page([self], path, summary or {}, run=run)
        from attnkit.viz._save import save_figure

        return writing(path, FIGURE, lambda p: save_figure(self.figure(), [p]))


def write_page(predictions: Sequence[Prediction], path: str | os.PathLike,
               summary: dict[str, Any], *, run: str | os.PathLike | None = None) -> Path:
    """Write one HTML page for ``predictions`` (all of one app) to ``path``, atomically
    (``run`` as in `Prediction.render`)."""
    if not predictions:
        raise UsageError("nothing to show: no predictions")
    output_file(path, PAGE, run=run)
    return write_output(path, PAGE, type(predictions[0]).page(predictions, summary), run=run)
