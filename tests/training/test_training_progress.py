"""The evaluation line a person reads (stderr and RUN/train.log)."""

from __future__ import annotations

import math
import os
import pty
import select
import subprocess
import sys
import time

from attnkit.training.progress import Heartbeat, progress_line


def test_progress_line():
    line = progress_line(step=120, epoch=1, epochs=3, train_loss=0.41234, samples_per_s=851.2,
                         elapsed=3723.4, metrics={"loss": 0.35671, "bleu": 12.3})
    assert line == ("step 120  epoch 2/3  train loss 0.4123  val loss 0.3567  val bleu 12.3  "
                    "851 samples/s  1h02m03s")
    line = progress_line(step=1, epoch=0, epochs=1, train_loss=math.nan, samples_per_s=3.0,
                         elapsed=59.9, metrics={"tiny": 1.5e-5})
    assert line.endswith("train loss nan  val tiny 1.500e-05  3 samples/s  59s")
    assert "\n" not in line
    # A split the app tracks beside validation is named as itself, not "val test_loss".
    line = progress_line(step=1, epoch=0, epochs=1, train_loss=0.5, samples_per_s=3.0,
                         elapsed=1.0, metrics={"loss": 0.5, "test_loss": 0.6,
                                               "test_accuracy": 0.9})
    assert "val loss 0.5  test loss 0.6  test accuracy 0.9" in line and "val test" not in line


def test_heartbeat_after_the_first_step_then_every_interval(capsys):
    now = [100.0]
    beat = Heartbeat(True, total_steps=100, every=60.0, clock=lambda: now[0])
    first = beat.tick(step=1, epoch=0, epochs=2, samples_per_s=50.0, elapsed=0.5)
    assert first.startswith("step 1/100  epoch 1/2  50 samples/s")
    # The first step also warmed up: no estimate from it alone.
    assert first.endswith("left ~? (timed from the next steps)")
    now[0] += 30
    assert beat.tick(step=20, epoch=0, epochs=2, samples_per_s=50.0, elapsed=30.5) is None
    now[0] += 31                                   # 61 s after the first line: due again
    line = beat.tick(step=41, epoch=0, epochs=2, samples_per_s=50.0, elapsed=61.5)
    # 40 steps in 61 s since the first line, 59 to go: about 90 s left.
    assert line.startswith("step 41/100") and line.endswith("left ~1m29s")
    assert "[attnkit.training] step 1/100" in capsys.readouterr().err
    assert Heartbeat(False, total_steps=5).tick(step=1, epoch=0, epochs=1, samples_per_s=1.0,
                                               elapsed=1.0) is None


def _train_command(out):
    return [sys.executable, "-m", "attnkit.cli.main", "translate", "train", "--data",
            "synthetic", "--out", str(out), "--train-size", "2000", "--epochs", "1",
            "--max-minutes", "0.5"]


def test_a_terminal_shows_the_bar_within_seconds(tmp_path):
    """Under a pseudo-terminal that reports no size (0 x 0, as some wrappers create), the
    tqdm bar is drawn: it used to draw nothing at all."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(_train_command(tmp_path / "run"), stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env={**os.environ,
                                                             "OMP_NUM_THREADS": "1"})
    os.close(slave)
    seen, start = b"", time.monotonic()
    try:
        while b"%|" not in seen and time.monotonic() - start < 60:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert b"epoch 1/1:" in seen and b"%|" in seen, seen[-500:]


def test_piped_output_gets_a_first_line_within_seconds(tmp_path):
    proc = subprocess.run(_train_command(tmp_path / "run"), capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    beats = [line for line in proc.stderr.splitlines()
             if line.startswith("[attnkit.training] step 1/")]
    assert beats and "samples/s  elapsed" in beats[0] and "left ~" in beats[0]
    # The time left names the test evaluation, which is then announced and timed.
    assert beats[0].endswith("+ the test evaluation")
    lines = proc.stderr.splitlines()
    start = lines.index(f"the test evaluation of {tmp_path / 'run'}...")
    assert lines[start + 1].startswith("the test evaluation: ")


def test_the_time_left_names_what_runs_after_training(capsys):
    now = [0.0]
    beat = Heartbeat(True, total_steps=10, clock=lambda: now[0], next_stage="the test evaluation")
    first = beat.tick(step=1, epoch=0, epochs=1, samples_per_s=1.0, elapsed=0.0)
    assert first.endswith("left ~? (timed from the next steps) + the test evaluation")
    beat.validated(75.0)
    now[0] += 61 + 75
    line = beat.tick(step=5, epoch=0, epochs=1, samples_per_s=1.0, elapsed=136.0)
    # 4 steps in 61 s of training, 5 to go: ~76 s, then the evaluation, with a validation's
    # time (this run validates nothing more: no evaluations counted).
    assert line.endswith("left ~1m16s + the test evaluation (a validation took 1m15s)")


def test_the_time_left_counts_every_validation_to_come():
    """A run that validates every epoch (sentiment reads its 25,000 test reviews each time):
    the time left counts those validations, not the training steps alone."""
    now = [0.0]
    beat = Heartbeat(True, total_steps=30, every=10.0, clock=lambda: now[0],
                     evaluations=lambda step, epoch: 3 - epoch)    # one per epoch of 10 steps
    beat.tick(step=1, epoch=0, epochs=3, samples_per_s=1.0, elapsed=0.0)
    now[0] += 10
    line = beat.tick(step=6, epoch=0, epochs=3, samples_per_s=1.0, elapsed=10.0)
    # 5 steps in 10 s, 24 to go: 48 s of steps, and 3 validations not timed yet.
    assert line.endswith("left ~48s + 3 validations (not timed yet)")
    now[0] += 40
    beat.validated(40.0)                                      # the first epoch's validation
    now[0] += 10
    line = beat.tick(step=16, epoch=1, epochs=3, samples_per_s=1.0, elapsed=60.0)
    # 15 steps in 60 - 40 s of training: 14 to go, 18.7 s; 2 validations of 40 s: ~1m38s.
    assert line.endswith("left ~1m38s")


def test_a_budget_caps_the_time_left_but_the_first_line_is_no_guess():
    now = [0.0]
    beat = Heartbeat(True, total_steps=10_000, every=10.0, budget_seconds=1200.0,
                     clock=lambda: now[0])
    assert "left ~? " in beat.tick(step=1, epoch=0, epochs=40, samples_per_s=1.0, elapsed=5.0)
    now[0] += 10
    line = beat.tick(step=101, epoch=0, epochs=40, samples_per_s=1.0, elapsed=15.0)
    assert line.endswith("left ~16m29s")          # 990 s of steps: under the budget
    now[0] += 10
    line = beat.tick(step=111, epoch=0, epochs=40, samples_per_s=1.0, elapsed=1190.0)
    assert line.endswith("left ~10s")                 # the budget ends first
    # Validations every epoch: when the budget ends the run first, only the one that closes
    # it is still to come, not every epoch's (the demo stopped within its first epoch).
    beat = Heartbeat(True, total_steps=2504, every=10.0, budget_seconds=120.0,
                     clock=lambda: now[0], evaluations=lambda step, epoch: 8 - epoch)
    beat.tick(step=1, epoch=0, epochs=8, samples_per_s=1.0, elapsed=1.0)
    now[0] += 60
    line = beat.tick(step=181, epoch=0, epochs=8, samples_per_s=1.0, elapsed=61.0)
    assert line.endswith("left ~59s + 1 validation (not timed yet)")
