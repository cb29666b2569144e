"""The trainer in one process: the loss falls, files of the run folder, early stopping,
max_minutes, non-finite loss, and resume continuing exactly."""

from __future__ import annotations

import errno
import importlib.util
import itertools
import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from attnkit.errors import CheckpointError
from attnkit.training import LossOutput, TrainConfig, Trainer, TrainingError, load_weights
from attnkit.training.checkpoint import load_checkpoint
from attnkit.training.trainer import build_optimizer

_spec = importlib.util.spec_from_file_location(
    "synthetic_task", Path(__file__).with_name("synthetic_task.py"))
task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(task)

TIMING = ("elapsed", "samples_per_s")


def metric_lines(run: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock fields (which differ between any two runs)."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k not in TIMING} for s in lines]


def params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def last_params(run: Path) -> dict[str, torch.Tensor]:
    model = task.make_model()
    load_weights(model, run / "last" / "model.safetensors")
    return params(model)

def crash_at_call(n: int):
    """A ``loss_fn`` that raises RuntimeError("simulated crash") on its ``n``-th call."""
    calls = {"n": 0}

    def crashing(model, batch):
        calls["n"] += 1
        if calls["n"] == n:
            raise RuntimeError("simulated crash")
        return task.loss_fn(model, batch)
    return crashing



def test_loss_falls_and_run_folder_is_complete(tmp_path):
    cfg = TrainConfig(epochs=4, batch_size=16, lr=2e-2, seed=0, device="auto",
                      schedule="linear", warmup_steps=2, log_every_steps=2, progress=False,
                      weight_decay=0.01)
    trainer = task.make_trainer(tmp_path, cfg, dropout=0.0)
    before = task.make_evaluate(task.make_data(32, seed=7))(trainer.model)["loss"]
    result = trainer.fit()
    assert result.stop_reason == "completed" and result.global_step == 4 * 6
    assert result.best_metric < 0.6 * before
    records = [json.loads(s) for s in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert len(train) == 12 and len(evals) == 4
    assert {"step", "epoch", "loss", "lr", "samples_per_s", "elapsed"} <= set(train[0])
    assert train[-1]["loss"] < train[0]["loss"]
    assert {"val_loss", "val_neg_loss"} <= set(evals[0])
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["app"] == "synthetic" and TrainConfig.from_dict(config["train"]) == cfg
    # best.safetensors holds the best evaluation's weights and says which step it was.
    model = task.make_model()
    meta = load_weights(model, tmp_path / "best.safetensors")
    assert meta["step"] == result.best_step
    assert meta["metrics"]["loss"] == pytest.approx(result.best_metric)
    # last/ is the final model (same tensors as the trained module).
    final = params(trainer.model)
    assert all(torch.equal(final[k], v) for k, v in last_params(tmp_path).items())


def test_early_stopping_counts_evaluations(tmp_path):
    values = iter([1.0, 0.5, 0.7, 0.6, 0.4])
    cfg = TrainConfig(epochs=50, batch_size=16, eval_every_steps=1, early_stopping_patience=2,
                      progress=False, device="cpu")
    data = task.make_data(32)
    trainer = Trainer(task.make_model(), cfg, tmp_path, train_dataset=data,
                      collate_fn=task.collate, loss_fn=task.loss_fn,
                      evaluate_fn=lambda m: {"loss": next(values)})
    result = trainer.fit()
    assert result.stop_reason == "early_stopping"
    assert result.global_step == 4 and result.best_step == 2 and result.best_metric == 0.5
    assert load_weights(task.make_model(), tmp_path / "best.safetensors")["step"] == 2


@pytest.mark.parametrize("tiebreak, best_step", [(None, 2), ("loss", 4)])
def test_exact_ties_of_the_select_metric_go_to_the_lower_tiebreak(tmp_path, tiebreak,
                                                                  best_step):
    # Accuracy saturates at step 2; the loss keeps falling until step 4, then rises.
    evals = itertools.chain([{"accuracy": 0.9, "loss": 0.9}, {"accuracy": 1.0, "loss": 0.5},
                             {"accuracy": 1.0, "loss": 0.6}, {"accuracy": 1.0, "loss": 0.2}],
                            itertools.repeat({"accuracy": 1.0, "loss": 0.3}))
    cfg = TrainConfig(epochs=50, batch_size=16, eval_every_steps=1, early_stopping_patience=3,
                      select_metric="accuracy", select_mode="max", select_tiebreak=tiebreak,
                      progress=False, device="cpu")
    trainer = Trainer(task.make_model(), cfg, tmp_path, train_dataset=task.make_data(32),
                      collate_fn=task.collate, loss_fn=task.loss_fn,
                      evaluate_fn=lambda m: next(evals))
    result = trainer.fit()
    assert result.best_step == best_step and result.best_metric == 1.0
    assert load_weights(task.make_model(), tmp_path / "best.safetensors")["step"] == best_step
    # A tie-break improvement counts as one for early stopping (patience 3).
    assert result.stop_reason == "early_stopping" and result.global_step == best_step + 3


def test_selection_key_missing_from_evaluate_fn_is_an_error(tmp_path):
    cfg = TrainConfig(epochs=1, batch_size=16, select_metric="loss", select_tiebreak="nll",
                      progress=False, device="cpu")
    trainer = Trainer(task.make_model(), cfg, tmp_path, train_dataset=task.make_data(32),
                      collate_fn=task.collate, loss_fn=task.loss_fn,
                      evaluate_fn=lambda m: {"loss": 1.0})
    with pytest.raises(ValueError, match="lacks the selection key 'nll'"):
        trainer.fit()


def test_max_minutes_stops_with_checkpoint_and_final_eval(tmp_path):
    cfg = TrainConfig(epochs=100, batch_size=16, max_minutes=1e-9, progress=False,
                      device="cpu")
    result = task.make_trainer(tmp_path, cfg).fit()
    assert result.stop_reason == "max_minutes" and result.global_step == 1
    assert metric_lines(tmp_path)[-1]["kind"] == "eval"
    m = task.make_model()
    state = load_checkpoint(tmp_path / "last", m, build_optimizer(m, cfg))
    assert state["position"]["global_step"] == 1


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        out = task.loss_fn(model, batch)
        return LossOutput(out.loss * (math.nan if calls["n"] == 5 else 1.0), out.count)

    cfg = TrainConfig(epochs=5, batch_size=16, checkpoint_every_steps=2, progress=False,
                      device="cpu")
    trainer = task.make_trainer(tmp_path, cfg, loss=loss)
    with pytest.raises(TrainingError, match="non-finite training loss.*step 5.*last good"):
        trainer.fit()
    m = task.make_model()
    state = load_checkpoint(tmp_path / "last", m, build_optimizer(m, cfg))
    assert state["position"]["global_step"] == 4
    assert all(torch.isfinite(p).all() for p in m.parameters())


def test_resume_in_process_equals_uninterrupted_run(tmp_path):
    # Checkpoint every 3 steps, crash inside loss_fn at step 8 (mid-epoch 1), resume from
    # step 6: the redone steps must draw the same dropout masks (RNG states restored).
    cfg = task.script_config(epochs=3, checkpoint_every=3)
    full = task.make_trainer(tmp_path / "full", cfg)
    full.fit()

    crashing = crash_at_call(8)
    with pytest.raises(RuntimeError, match="simulated crash"):
        task.make_trainer(tmp_path / "cut", cfg, loss=crashing).fit()
    resumed = task.make_trainer(tmp_path / "cut", cfg)  # fresh model, like a new process
    result = resumed.fit(resume=True)
    assert result.global_step == 18
    assert metric_lines(tmp_path / "cut") == metric_lines(tmp_path / "full")
    want, got = last_params(tmp_path / "full"), last_params(tmp_path / "cut")
    assert all(torch.equal(want[k], got[k]) for k in want)


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        task.make_trainer(tmp_path, task.script_config()).fit(resume=True)


LOG_LINE = re.compile(r"^step (\d+)  epoch (\d+)/(\d+)  train loss \S+  val loss \S+  "
                      r"val neg_loss \S+  \d+ samples/s  \S+$")


def test_train_log_one_line_per_evaluation_on_stderr_too(tmp_path, capsys):
    cfg = task.script_config(epochs=2)  # 6 batches per epoch, evaluations every 5 steps
    task.make_trainer(tmp_path, cfg).fit()
    lines = (tmp_path / "train.log").read_text().splitlines()
    steps = [r["step"] for r in metric_lines(tmp_path) if r["kind"] == "eval"]
    assert steps == [5, 10, 12]
    assert [int(LOG_LINE.match(s).group(1)) for s in lines] == steps
    assert [LOG_LINE.match(s).group(2, 3) for s in lines] == [("1", "2"), ("2", "2"),
                                                              ("2", "2")]
    # The train loss of a line is the mean over the steps since the previous evaluation.
    evals = [r for r in metric_lines(tmp_path) if r["kind"] == "eval"]
    assert f"val loss {evals[0]['val_loss']:.4g}" in lines[0]
    err = capsys.readouterr().err
    assert all(f"[attnkit.training] {s}" in err for s in lines)


def test_train_log_train_loss_is_since_the_last_evaluation(tmp_path):
    cfg = TrainConfig(epochs=1, batch_size=16, eval_every_steps=3, log_every_steps=1,
                      progress=False, device="cpu")
    task.make_trainer(tmp_path, cfg, dropout=0.0).fit()  # 6 steps: evaluations at 3 and 6
    train = [r["loss"] for r in metric_lines(tmp_path) if r["kind"] == "train"]
    lines = (tmp_path / "train.log").read_text().splitlines()
    for line, losses in zip(lines, (train[:3], train[3:]), strict=True):
        assert f"train loss {sum(losses) / 3:.4g}" in line  # equal counts: a plain mean


def test_train_log_appended_on_resume_emptied_by_a_fresh_run(tmp_path):
    cfg = task.script_config(epochs=3, checkpoint_every=3)
    crashing = crash_at_call(13)
    with pytest.raises(RuntimeError):
        task.make_trainer(tmp_path, cfg, loss=crashing).fit()
    before = (tmp_path / "train.log").read_text()
    assert len(before.splitlines()) == 2  # evaluations at steps 5 and 10
    task.make_trainer(tmp_path, cfg).fit(resume=True)  # from step 12
    after = (tmp_path / "train.log").read_text()
    assert after.startswith(before)
    assert [int(LOG_LINE.match(s).group(1)) for s in after.splitlines()[2:]] == [15, 18]
    task.make_trainer(tmp_path, task.script_config(epochs=1)).fit()
    assert len((tmp_path / "train.log").read_text().splitlines()) == 2  # steps 5 and 6


def test_resume_with_best_but_no_last_says_start_again(tmp_path):
    # A kill -9 during the first checkpoint write: best.safetensors (and config.json) exist,
    # last/ does not, and the half-written checkpoint folder is still there.
    cfg = task.script_config(epochs=2, checkpoint_every=None)
    task.make_trainer(tmp_path, cfg).fit()
    shutil.rmtree(tmp_path / "last")
    (tmp_path / ".last.ab12cd34.tmp").mkdir()
    (tmp_path / ".last.ab12cd34.tmp" / "model.safetensors").write_bytes(b"half")
    with pytest.raises(CheckpointError, match=r"no checkpoint found \(the run was stopped "
                       r"before its first checkpoint\).*start it again with --overwrite"):
        task.make_trainer(tmp_path, cfg).fit(resume=True)
    assert not (tmp_path / ".last.ab12cd34.tmp").exists()


def test_fit_removes_temporaries_of_killed_writes(tmp_path):
    cfg = task.script_config(epochs=1)
    task.make_trainer(tmp_path, cfg).fit()
    stale = [".best.safetensors.q1w2e3r4.tmp", ".config.json.zz_99aa0.tmp"]
    for resume in (True, False):
        for name in stale:
            (tmp_path / name).write_bytes(b"partial")
        (tmp_path / ".last.t0t0t0t0.tmp").mkdir()
        task.make_trainer(tmp_path, cfg).fit(resume=resume)
        assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_resume_over_a_corrupt_best_is_refused(tmp_path):
    cfg = task.script_config(epochs=2, checkpoint_every=None)
    crashing = crash_at_call(8)
    with pytest.raises(RuntimeError):
        task.make_trainer(tmp_path, cfg, loss=crashing).fit()
    best = tmp_path / "best.safetensors"
    raw = bytearray(best.read_bytes())
    raw[-3] ^= 0x01
    best.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"best.safetensors: checksum mismatch.*cannot be "
                       r"resumed.*--overwrite"):
        task.make_trainer(tmp_path, cfg).fit(resume=True)
    assert best.read_bytes() == bytes(raw)  # left for the user to look at


def test_disk_full_at_a_checkpoint_stops_the_run_and_keeps_the_last_one(tmp_path, monkeypatch):
    from attnkit.training import checkpoint
    real_save_file = checkpoint.save_file
    writes = {"n": 0}

    def fills_up(tensors, filename, metadata=None):
        if "/.last." in str(filename):
            writes["n"] += 1
            if writes["n"] > 2:  # the second checkpoint (model + optimizer each)
                raise OSError(errno.ENOSPC, "No space left on device")
        real_save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr(checkpoint, "save_file", fills_up)
    cfg = task.script_config(epochs=3, checkpoint_every=4)
    with pytest.raises(CheckpointError, match=r"cannot write .*last/model.safetensors: no "
                       "space left on device"):
        task.make_trainer(tmp_path, cfg).fit()
    m = task.make_model()
    state = load_checkpoint(tmp_path / "last", m, build_optimizer(m, cfg))
    assert state["position"]["global_step"] == 4
    monkeypatch.undo()
    assert task.make_trainer(tmp_path, cfg).fit(resume=True).global_step == 18
