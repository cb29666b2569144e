"""What a person watching a run sees: the tqdm bar and one line per evaluation.

The evaluation line goes to stderr and to ``RUN/train.log`` (plain text, so a run started
without a terminal, e.g. under nohup or a scheduler, can be followed with ``tail -f``).

Example:
    >>> progress_line(step=120, epoch=1, epochs=3, train_loss=0.41234, samples_per_s=851.2,
    ...               elapsed=83.4, metrics={"loss": 0.35671, "bleu": 12.3})
    'step 120  epoch 2/3  train loss 0.4123  val loss 0.3567  val bleu 12.3  851 samples/s  1m23s'
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from attnkit.fileio import append_text


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(*, step: int, epoch: int, epochs: int, train_loss: float,
                  samples_per_s: float, elapsed: float, metrics: dict[str, float]) -> str:
    """One human-readable line about an evaluation.

    Args:
        step: optimizer steps done; ``epoch``: the 0-based epoch it happened in (printed
            1-based, ``of epochs``).
        train_loss: mean training loss since the previous evaluation.
        samples_per_s: training examples per second since the previous evaluation.
        elapsed: seconds of training so far (resumed runs included).
        metrics: the evaluation's values, printed as ``val <name> <value>``.
    """
    parts = [f"step {step}", f"epoch {epoch + 1}/{epochs}", f"train loss {_number(train_loss)}"]
    parts += [f"val {name} {_number(value)}" for name, value in metrics.items()]
    parts += [f"{samples_per_s:.0f} samples/s", _duration(elapsed)]
    return "  ".join(parts)


def append_line(path: Path, line: str) -> None:
    """Append ``line`` to the text file ``path`` (one write: a reader never sees half; a
    link in its place is refused, so a run never writes outside its folder)."""
    append_text(path, line + "\n")


def say(message: str) -> None:
    """Print ``message`` on stderr above the progress bar, if one is shown (a plain print
    would tear it in two)."""
    from tqdm.auto import tqdm
    tqdm.write(message, file=sys.stderr)
    sys.stderr.flush()


def progress_bar(enabled: bool, total: int, initial: int, epoch: int, epochs: int):
    """A tqdm bar over the batches of one epoch when ``enabled`` and stderr is a terminal;
    else None."""
    if not (enabled and sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{epochs}",
                leave=False, dynamic_ncols=True)
