"""save_weights/load_weights and RUN/last: round trips, and a clear CheckpointError for every
damaged or foreign file."""

from __future__ import annotations

import errno
import json

import pytest
import safetensors
import torch
from torch import nn

from attnkit.errors import CheckpointError
from attnkit.training import checkpoint, load_weights, save_weights
from attnkit.training.checkpoint import (
    flatten_optimizer,
    load_checkpoint,
    remove_stale_temporaries,
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
    with safetensors.safe_open(tmp_path / "t.safetensors", "pt") as f:
        assert len(list(f.keys())) == 1
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


def _flip_in_metadata(path, old: bytes, new: bytes) -> None:
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    assert raw.count(old, 8, 8 + header_len) == 1 and len(old) == len(new)
    path.write_bytes(raw.replace(old, new))


def test_a_flipped_byte_in_the_header_metadata_is_caught(tmp_path):
    path = tmp_path / "best.safetensors"
    save_weights(_model(), path, {"step": 7, "metrics": {"loss": 0.5}})
    _flip_in_metadata(path, b'\\"step\\": 7', b'\\"step\\": 6')
    with pytest.raises(CheckpointError, match="best.safetensors: checksum mismatch in the header"):
        load_weights(_model(), path)


def test_a_removed_header_checksum_is_caught(tmp_path):
    path = tmp_path / "w.safetensors"
    save_weights(_model(), path, {"step": 7})
    _flip_in_metadata(path, b'"attnkit_header_sha256"', b'"attnkit_header_sha25X"')
    with pytest.raises(CheckpointError, match="checksum mismatch in the header"):
        load_weights(_model(), path)


def _disk_full(kind: str):
    def save_file(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"partial")
        if kind == "safetensors":
            from safetensors import SafetensorError
            # What safetensors 0.8 raised on a full tmpfs.
            raise SafetensorError("Error while serializing: I/O error: No space left on device "
                                  "(os error 28)")
        raise OSError(errno.ENOSPC, "No space left on device")
    return save_file


@pytest.mark.parametrize("kind", ["safetensors", "oserror"])
def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(tmp_path, monkeypatch,
                                                                     kind):
    model = _model()
    opt = _trained_optimizer(model)
    folder = tmp_path / "last"
    save_checkpoint(folder, model, opt, {"position": {"global_step": 2}})
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setattr(checkpoint, "save_file", _disk_full(kind))
    with pytest.raises(CheckpointError, match=r"cannot write .*last/model.safetensors: no "
                       r"space left on device \(needs about [\d.]+ (kB|bytes)\)"):
        save_checkpoint(folder, model, opt, {"position": {"global_step": 3}})
    with pytest.raises(CheckpointError, match=r"cannot write .*best.safetensors: no space"):
        save_weights(model, tmp_path / "best.safetensors")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]  # no temporaries left
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    m2 = _model()
    o2 = torch.optim.AdamW(m2.parameters(), lr=0.1)
    assert load_checkpoint(folder, m2, o2)["position"]["global_step"] == 2


def test_other_write_errors_are_not_called_disk_full(tmp_path, monkeypatch):
    def denied(tensors, filename, metadata=None):
        raise OSError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(checkpoint, "save_file", denied)
    with pytest.raises(PermissionError):
        save_weights(_model(), tmp_path / "w.safetensors")


def test_remove_stale_temporaries(tmp_path):
    keep = ["best.safetensors", "config.json", "last", "notes.tmp", ".hidden", ".tmpfile1"]
    stale = [".best.safetensors.k2j_8x0q.tmp", ".config.json.abcd1234.tmp", ".tmpLeTygF"]
    for name in keep[:2] + keep[3:] + stale:
        (tmp_path / name).write_text("x")
    (tmp_path / "last").mkdir()
    (tmp_path / ".last.x7y8z9w0.tmp").mkdir()
    (tmp_path / ".last.x7y8z9w0.tmp" / "model.safetensors").write_text("x")
    removed = remove_stale_temporaries(tmp_path)
    assert sorted(p.name for p in removed) == sorted(stale + [".last.x7y8z9w0.tmp"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)


def test_a_crash_mid_swap_leaves_prev_until_the_next_checkpoint_is_in(tmp_path, monkeypatch):
    model = _model()
    opt = _trained_optimizer(model)
    folder = tmp_path / "last"
    save_checkpoint(folder, model, opt, {"position": {"global_step": 2}})
    folder.rename(tmp_path / "last.prev")  # killed between the two renames of the swap
    renames = []
    real_replace = checkpoint.os.replace

    def watch(src, dst):
        renames.append((tmp_path / "last.prev").exists())
        real_replace(src, dst)
    monkeypatch.setattr(checkpoint.os, "replace", watch)
    save_checkpoint(folder, model, opt, {"position": {"global_step": 3}})
    # prev still existed when the new folder moved in (there was always a checkpoint).
    assert renames[-1] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]
