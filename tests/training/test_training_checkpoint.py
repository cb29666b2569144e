"""save_weights/load_weights and RUN/last: round trips, and a clear CheckpointError for every
damaged or foreign file."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from attnkit.errors import CheckpointError
from attnkit.training import load_weights, save_weights
from attnkit.training.checkpoint import (
    flatten_optimizer,
    load_checkpoint,
    save_checkpoint,
    unflatten_optimizer,
)


def _model(hidden: int = 5) -> nn.Module:
    return nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def _trained_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    for _ in range(2):
        model(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
    return opt


def test_weights_round_trip_with_metadata(tmp_path):
    a, b = _model(), _model()
    save_weights(a, tmp_path / "w.safetensors", {"step": 7, "metrics": {"loss": 0.5}})
    meta = load_weights(b, tmp_path / "w.safetensors")
    assert meta == {"step": 7, "metrics": {"loss": 0.5}}
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_tied_weights_are_stored_once_and_restored(tmp_path):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 3)
            self.out = nn.Linear(3, 4, bias=False)
            self.out.weight = self.emb.weight

    a, b = Tied(), Tied()
    save_weights(a, tmp_path / "t.safetensors")
    load_weights(b, tmp_path / "t.safetensors")
    assert torch.equal(b.out.weight, a.emb.weight)
    assert b.out.weight is b.emb.weight


def test_missing_truncated_flipped_and_foreign_files(tmp_path):
    path = tmp_path / "w.safetensors"
    with pytest.raises(CheckpointError, match="missing"):
        load_weights(_model(), path)
    save_weights(_model(), path)
    raw = path.read_bytes()

    path.write_bytes(raw[: len(raw) - 7])
    with pytest.raises(CheckpointError, match="truncated|corrupted"):
        load_weights(_model(), path)

    flipped = bytearray(raw)
    flipped[-3] ^= 0x01  # a byte of tensor data: only the checksum can notice
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="checksum"):
        load_weights(_model(), path)

    path.write_bytes(raw)
    with pytest.raises(CheckpointError, match="another model.*shape mismatch"):
        load_weights(_model(hidden=6), path)
    with pytest.raises(CheckpointError, match="missing keys"):
        load_weights(nn.Sequential(_model(), nn.Linear(2, 2)), path)


def test_optimizer_flatten_round_trip():
    model = _model()
    opt = _trained_optimizer(model)
    tensors, rest = flatten_optimizer(opt.state_dict())
    json.dumps(rest)  # the non-tensor part must be JSON
    back = unflatten_optimizer(tensors, json.loads(json.dumps(rest)))
    opt2 = torch.optim.AdamW(model.parameters(), lr=0.1)
    opt2.load_state_dict(back)
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s1["param_groups"] == s2["param_groups"]
    for pid, st in s1["state"].items():
        for name, v in st.items():
            assert torch.equal(torch.as_tensor(v), torch.as_tensor(s2["state"][pid][name]))


def test_checkpoint_folder_round_trip_and_damage(tmp_path):
    model = _model()
    opt = _trained_optimizer(model)
    folder = tmp_path / "last"
    save_checkpoint(folder, model, opt, {"position": {"global_step": 2}})
    save_checkpoint(folder, model, opt, {"position": {"global_step": 3}})  # swap over old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]

    m2 = _model()
    o2 = torch.optim.AdamW(m2.parameters(), lr=0.1)
    assert load_checkpoint(folder, m2, o2)["position"]["global_step"] == 3
    assert torch.equal(o2.state_dict()["state"][0]["exp_avg"],
                       opt.state_dict()["state"][0]["exp_avg"])

    def fresh():
        m = _model()
        return m, torch.optim.AdamW(m.parameters(), lr=0.1)

    opt_file = folder / "optimizer.safetensors"
    good = opt_file.read_bytes()
    opt_file.write_bytes(good[:-10])
    with pytest.raises(CheckpointError, match="optimizer.safetensors: checksum"):
        load_checkpoint(folder, *fresh())
    opt_file.unlink()
    with pytest.raises(CheckpointError, match="optimizer.safetensors: checkpoint file is missing"):
        load_checkpoint(folder, *fresh())
    opt_file.write_bytes(good)

    state = folder / "state.json"
    text = state.read_text()
    state.write_text(text.replace('"global_step": 3', '"global_step": 4'))
    with pytest.raises(CheckpointError, match="state.json: checksum"):
        load_checkpoint(folder, *fresh())
    state.write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(folder, *fresh())
    state.write_text(text)

    other = _model(hidden=9)
    with pytest.raises(CheckpointError, match="another model"):
        load_checkpoint(folder, other, torch.optim.AdamW(other.parameters()))
    state.unlink()
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        load_checkpoint(folder, *fresh())
