"""What a person watching a run sees: the tqdm bar at a terminal, else a `Heartbeat` line
after the first step and then every minute (so a long run never looks hung), and one line per
evaluation (`progress_line`, on stderr and in ``RUN/train.log``, to follow with ``tail -f``).

Example:
    >>> progress_line(step=120, epoch=1, epochs=3, train_loss=0.41234, samples_per_s=851.2,
    ...               elapsed=83.4, metrics={"loss": 0.35671, "bleu": 12.3})
    'step 120  epoch 2/3  train loss 0.4123  val loss 0.3567  val bleu 12.3  851 samples/s  1m23s'
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"


def _duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(*, step: int, epoch: int, epochs: int, train_loss: float,
                  samples_per_s: float, elapsed: float, metrics: dict[str, float]) -> str:
    """One line about an evaluation: ``epoch`` 0-based (printed 1-based), ``train_loss`` and
    ``samples_per_s`` since the previous one, ``metrics`` as ``val <name>`` (``test_<name>``:
    ``test <name>``)."""
    parts = [f"step {step}", f"epoch {epoch + 1}/{epochs}", f"train loss {_number(train_loss)}"]
    # A metric of another split names it (``test_loss``: "test loss"), the rest are validation's.
    parts += [(f"test {name[5:]}" if name.startswith("test_") else f"val {name}")
              + f" {_number(value)}" for name, value in metrics.items()]
    parts += [f"{samples_per_s:.0f} samples/s", _duration(elapsed)]
    return "  ".join(parts)


def say(message: str) -> None:
    """Print ``message`` on stderr above the progress bar, if one is shown."""
    from tqdm.auto import tqdm
    tqdm.write(message, file=sys.stderr)
    sys.stderr.flush()


def progress_bar(enabled: bool, total: int, initial: int, epoch: int, epochs: int):
    """A tqdm bar over the batches of one epoch when ``enabled`` and stderr is a terminal;
    else None."""
    if not (enabled and sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm
    # A pseudo-terminal that reports 0 x 0 (some wrappers, CI consoles) gets 80 columns: tqdm
    # would draw nothing; else tqdm follows the width stderr reports.
    try:
        width = None if os.get_terminal_size(sys.stderr.fileno()).columns > 0 else 80
    except (OSError, ValueError):
        width = 80
    return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{epochs}",
                leave=False, dynamic_ncols=width is None, ncols=width,
                nrows=None if width is None else 24)


class Heartbeat:
    """One line on stderr after the first step, then at least every ``every`` seconds, for a
    run without a bar (``enabled``), with the time left (docs/concepts.md, "Progress lines").

    ``total_steps``: at most; ``budget_seconds``: ``max_minutes`` in seconds or None;
    ``next_stage``: what runs after the last step (``"the test evaluation"``), named;
    ``evaluations``: ``(step, epoch) -> validations still to run`` (that step's included).

    Example:
        >>> beat = Heartbeat(False, total_steps=100)
        >>> beat.tick(step=1, epoch=0, epochs=2, samples_per_s=50.0, elapsed=1.2) is None
        True
    """

    def __init__(self, enabled: bool, total_steps: int, every: float = 60.0,
                 budget_seconds: float | None = None, clock=time.monotonic,
                 next_stage: str | None = None,
                 evaluations: Callable[[int, int], int] | None = None):
        self.enabled, self.total_steps, self.every = enabled, total_steps, every
        self.budget_seconds, self.clock, self.next_stage = budget_seconds, clock, next_stage
        self.evaluations = evaluations
        self.validation_seconds: float | None = None
        self.validating = 0.0          # seconds spent validating since the first line
        self.last: float | None = None
        self.first: tuple[int, float] | None = None   # (step, time) of the first line

    def validated(self, seconds: float) -> None:
        """Record a validation that took ``seconds`` (the trainer calls it after each)."""
        self.validation_seconds = seconds
        if self.first is not None:
            self.validating += seconds

    def tick(self, *, step: int, epoch: int, epochs: int, samples_per_s: float,
             elapsed: float) -> str | None:
        """Print (and return) the line when one is due; None otherwise."""
        if not self.enabled:
            return None
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return None
        self.last = now
        if self.first is None:
            self.first = (step, now)
        line = (f"step {step}/{self.total_steps}  epoch {epoch + 1}/{epochs}  "
                f"{samples_per_s:.0f} samples/s  elapsed {_duration(elapsed)}  "
                f"left {self._left(step, epoch, now, elapsed)}")
        if self.next_stage:
            took = self.validation_seconds
            line += f" + {self.next_stage}" + ("" if took is None else
                                               f" (a validation took {_duration(took)})")
        say(f"[attnkit.training] {line}")
        return line

    def _left(self, step: int, epoch: int, now: float, elapsed: float) -> str:
        """The time left, or what is not timed yet."""
        first_step, first_time = self.first
        done = step - first_step
        evals = self.evaluations(step, epoch) if self.evaluations else 0
        if done <= 0:
            return "~? (timed from the next steps)"
        per_step = max(now - first_time - self.validating, 0.0) / done
        took = self.validation_seconds
        left = per_step * max(self.total_steps - step, 0) + evals * (took or 0.0)
        budget = None if self.budget_seconds is None else max(self.budget_seconds - elapsed, 0.0)
        if budget is not None and left > budget:
            # The budget ends the run first: what is left is the budget (validations run
            # inside it) and the validation that closes the stopped run.
            left, evals = budget + (took or 0.0), 1 if evals else 0
        text = f"~{_duration(left)}"
        if evals and took is None:
            text += f" + {evals} validation{'s' if evals > 1 else ''} (not timed yet)"
        return text
