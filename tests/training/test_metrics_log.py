"""Reading the trainer's metrics.jsonl back (attnkit.training.run_folder.read_evaluations)."""

from __future__ import annotations

import json

import pytest

from attnkit.errors import CheckpointError
from attnkit.training.run_folder import METRICS_LOG, read_evaluations


def test_read_evaluations_keeps_the_eval_lines_in_order(tmp_path):
    lines = [{"kind": "train", "step": 1, "loss": 0.7},
             {"kind": "eval", "epoch": 0, "step": 2, "val_accuracy": 0.5},
             {"kind": "train", "step": 3, "loss": 0.6},
             {"kind": "eval", "epoch": 1, "step": 4, "val_accuracy": 0.75}]
    text = "\n".join(json.dumps(x) for x in lines)
    (tmp_path / METRICS_LOG).write_text(text + "\n\n", encoding="utf-8")
    evals = read_evaluations(tmp_path)
    assert [e["epoch"] for e in evals] == [0, 1]
    assert [e["val_accuracy"] for e in evals] == [0.5, 0.75]


def test_read_evaluations_refuses_a_missing_log_and_a_line_that_is_not_json(tmp_path):
    with pytest.raises(CheckpointError):
        read_evaluations(tmp_path)
    (tmp_path / METRICS_LOG).write_text('{"kind": "eval", "epoch": 0}\n{oops\n',
                                        encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"metrics.jsonl line 2: not JSON"):
        read_evaluations(tmp_path)
    (tmp_path / METRICS_LOG).write_text('{"kind": "eval", "epoch": 0}\n[1, 2]\n',
                                        encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"metrics.jsonl line 2: not a JSON object"):
        read_evaluations(tmp_path)
