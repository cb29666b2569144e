"""attnkit.compiler: packages built once into the user's private cache, loaded in a fraction of
a second; another machine's, a damaged one, a build that cannot run and a full disk are each one
line, never an error (#44)."""

from __future__ import annotations

import json
import stat

import pytest
import torch
from torch import nn
from torch.export import Dim

from attnkit import compiler
from attnkit.compiler import MACHINE_FILE, Packages, cache_root, machine_key, weights_digest


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([2.0, 3.0]))

    def forward(self, x):
        return (x * self.w).sum(-1)


def specs():
    return {"twice": (Twice(), (torch.ones(3, 2),), ({0: Dim("rows", min=1, max=64)},))}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One package of `Twice`, built once (a compile takes seconds)."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNKIT_CACHE", str(folder))
        lines = []
        graphs = Packages("twice", "d1").build(specs(), lines.append)
    assert graphs is not None, lines
    return folder


def test_a_package_is_built_private_and_loads_again(built, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(built))
    lines = []
    graphs = Packages("twice", "d1").load(["twice"], lines.append)
    assert graphs is not None and lines == []
    assert torch.equal(graphs["twice"](torch.ones(5, 2)), torch.full((5,), 5.0))
    assert stat.S_IMODE(cache_root().stat().st_mode) == 0o700
    assert json.loads((cache_root() / "twice-d1" / MACHINE_FILE).read_text()) == machine_key()


def test_another_machines_or_a_damaged_package_is_built_again(built, monkeypatch, tmp_path):
    import shutil

    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path))
    shutil.copytree(built / "compiled", tmp_path / "compiled")
    folder = tmp_path / "compiled" / "twice-d1"
    (folder / MACHINE_FILE).write_text(json.dumps({**machine_key(), "torch": "1.0.0"}))
    lines = []
    assert Packages("twice", "d1").load(["twice"], lines.append) is None
    assert len(lines) == 1 and "built for" in lines[0] and "torch 1.0.0" in lines[0]
    assert not folder.exists()
    shutil.copytree(built / "compiled" / "twice-d1", folder)
    (folder / "twice.pt2").write_bytes(b"not a package")
    lines = []
    assert Packages("twice", "d1").load(["twice"], lines.append) is None
    assert len(lines) == 1 and "damaged" in lines[0] and not folder.exists()
    assert Packages("twice", "d2").load(["twice"], lines.append) is None and len(lines) == 1


def test_a_build_that_cannot_run_is_one_warning(cache, monkeypatch):
    """No C++ compiler at hand: one warning, no folder, and the caller stays eager."""
    import torch._inductor.config as inductor

    lines = []
    with inductor.patch({"cpp.cxx": ("/no/such/compiler",)}):
        assert Packages("twice", "d3").build(specs(), lines.append) is None
    assert len(lines) == 1 and lines[0].startswith("attnkit: warning: decoding could not be "
                                                   "compiled")
    assert not (cache_root() / "twice-d3").exists()
    # No staging folder is left; the lock file stays (deleting a lock file races its users).
    assert [p.name for p in cache_root().iterdir() if p.name.startswith(".twice")] == [
        ".twice-d3.lock"]


def test_a_full_disk_is_one_warning(cache, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compiler, "atomic_write_text", full)
    lines = []
    assert Packages("twice", "d4").build(specs(), lines.append) is None
    assert len(lines) == 1 and "No space left" in lines[0]


def test_the_digest_follows_the_weights():
    a, b = Twice(), Twice()
    assert weights_digest(a.state_dict()) == weights_digest(b.state_dict())
    with torch.no_grad():
        b.w[0] = 2.5
    assert weights_digest(a.state_dict()) != weights_digest(b.state_dict())
