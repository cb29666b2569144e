"""Real processes: 2-rank torchrun equals one process, SIGKILL + resume equals an uninterrupted
run, SIGTERM leaves a checkpoint and a resume message."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

from attnkit.training import load_weights
from attnkit.training.checkpoint import load_checkpoint
from attnkit.training.trainer import build_optimizer

SCRIPT = Path(__file__).with_name("synthetic_task.py")
_spec = importlib.util.spec_from_file_location("synthetic_task", SCRIPT)
task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(task)

TIMING = ("elapsed", "samples_per_s")


def _env() -> dict[str, str]:
    # One thread per process: the test machine has few cores, and results must not depend on it.
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric_lines(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k not in TIMING} for s in lines]


def _last_params(run: Path) -> dict[str, torch.Tensor]:
    model = task.make_model()
    load_weights(model, run / "last" / "model.safetensors")
    return model.state_dict()


def test_two_ranks_equal_one_process(tmp_path):
    # 80 examples, batch 16: 5 batches; with 2 ranks each takes 8. Dropout off (its masks are
    # per rank by design).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           f"--master_port={_free_port()}", str(SCRIPT), str(tmp_path / "ddp"),
           "--epochs", "2", "--dropout", "0", "--num-examples", "80", "--batch-size", "16"]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("RESULT completed 10") == 2  # both ranks stop together

    cfg = task.script_config(epochs=2, batch_size=16)
    task.make_trainer(tmp_path / "one", cfg, dropout=0.0, n=80).fit()
    want, got = _last_params(tmp_path / "one"), _last_params(tmp_path / "ddp")
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-5)
    one, ddp = _metric_lines(tmp_path / "one"), _metric_lines(tmp_path / "ddp")
    # train.log: one line per evaluation, written once (by rank 0).
    logs = [[s.split("  ")[:2] for s in (tmp_path / run / "train.log").read_text().splitlines()]
            for run in ("one", "ddp")]
    assert logs[0] == logs[1] == [["step 5", "epoch 1/2"], ["step 10", "epoch 2/2"]]
    assert [r["step"] for r in one] == [r["step"] for r in ddp]
    for a, b in zip(one, ddp, strict=True):
        for key in ("loss", "val_loss"):
            if key in a:
                assert abs(a[key] - b[key]) < 1e-5


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    full = tmp_path / "full"
    task.make_trainer(full, task.script_config(epochs=3, checkpoint_every=4)).fit()

    cut = tmp_path / "cut"
    base = [sys.executable, str(SCRIPT), str(cut), "--epochs", "3", "--checkpoint-every", "4"]
    killed = subprocess.run(base + ["--die-at-step", "11"], env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert json.loads((cut / "last" / "state.json").read_text())["state"]["position"][
        "global_step"] == 8  # mid-epoch 1 (6 batches per epoch)
    resumed = subprocess.run(base + ["--resume"], env=_env(), capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "RESULT completed 18" in resumed.stdout
    assert _metric_lines(cut) == _metric_lines(full)
    want, got = _last_params(full), _last_params(cut)
    assert all(torch.equal(want[k], got[k]) for k in want)
    best_full = load_weights(task.make_model(), full / "best.safetensors")
    best_cut = load_weights(task.make_model(), cut / "best.safetensors")
    assert best_full == best_cut


def test_sigterm_checkpoints_and_says_how_to_resume(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(run), "--epochs", "100",
                             "--sleep", "0.05"], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        metrics = run / "metrics.jsonl"
        while time.monotonic() < deadline:
            if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err and f"--resume {run}" in err
    m = task.make_model()
    state = load_checkpoint(run / "last", m, build_optimizer(m, task.script_config()))
    step = state["position"]["global_step"]
    assert step >= 3 and f"RESULT signal {step}" in out


TEARDOWN_SCRIPT = """
import gc
import weakref
import torch
import torch.distributed as dist
from attnkit.training import distributed as D

gc.disable()  # no automatic pass may free the cycle first (as none need run before exit)
dist.init_process_group("gloo")
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1))
ddp(torch.ones(2, 3)).sum().backward()
alive = weakref.ref(ddp)
del ddp  # DDP sits in a reference cycle: this alone does not free it (nor its group)
print("before", alive() is not None)
D.teardown(D.DistInfo(0, 1, torch.device("cpu"), created_group=True))
print("after", alive() is not None, dist.is_initialized())
"""


def test_teardown_frees_the_ddp_wrapper_before_the_group():
    env = {**_env(), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "RANK": "0", "WORLD_SIZE": "1"}
    proc = subprocess.run([sys.executable, "-c", TEARDOWN_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["before", "True", "after", "False", "False"]
