"""Compiled training steps: what ``compile="auto"`` decides, a seed fixing a compiled run,
resume exact compiled to compiled, and a compile that fails falling back to eager.

The model is tiny and its batches vary in both sizes (one of a single row), so the compiled
step is dynamic; one uninterrupted compiled run (module fixture) serves several tests. Each
compiled run after the first starts from a reset dynamo, as a new process would, and compiles
again from Inductor's cache.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.training import LossOutput, TrainConfig, Trainer, load_weights
from attnkit.training.compiling import AUTO_MIN_MINUTES, AUTO_MIN_STEPS, resolve_compile
from attnkit.training.seeding import seed_everything

VOCAB = 11
# Batch sizes of an epoch; the plan shuffles them (and the rows) by epoch and seed.
SIZES = (4, 3, 5, 1, 4, 2, 5, 3)


class Tiny(nn.Module):
    """Embedded ids, dropout, masked mean over time, one output: ``ids [B, T]`` -> ``[B]``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 8)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(8, 1)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        real = (torch.arange(ids.shape[1]) < lengths[:, None]).unsqueeze(-1)
        x = self.drop(torch.tanh(self.emb(ids))) * real
        return self.out(x.sum(1) / lengths[:, None]).squeeze(-1)


def data() -> list[tuple[list[int], float]]:
    g = torch.Generator().manual_seed(5)
    rows = []
    for _ in range(sum(SIZES)):
        ids = torch.randint(1, VOCAB, (int(torch.randint(1, 7, (1,), generator=g)),),
                            generator=g).tolist()
        rows.append((ids, float(sum(ids)) / 20.0))
    return rows


def plan(epoch: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed * 100 + epoch)
    order = torch.randperm(sum(SIZES), generator=g).tolist()
    sizes = [SIZES[i] for i in torch.randperm(len(SIZES), generator=g).tolist()]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [order[s:s + n] for s, n in zip(starts, sizes, strict=True)]


def collate(rows: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([ids + [0] * (width - len(ids)) for ids, _ in rows])
    return (ids, torch.tensor([len(i) for i, _ in rows]),
            torch.tensor([y for _, y in rows]))


def loss_fn(model: nn.Module, batch) -> LossOutput:
    ids, lengths, y = batch
    return LossOutput(F.mse_loss(model(ids, lengths), y), ids.shape[0])


def config(compile: str | bool, **changes) -> TrainConfig:
    return TrainConfig(**{"epochs": 2, "batch_size": 4, "lr": 0.05, "seed": 3, "device": "cpu",
                          "amp": "off", "compile": compile, "progress": False,
                          "log_every_steps": 1, "checkpoint_every_steps": 3, **changes})


def trainer(run, cfg: TrainConfig, collate_fn=collate) -> Trainer:
    seed_everything(cfg.seed)
    return Trainer(Tiny(), cfg, run, train_dataset=data(), collate_fn=collate_fn,
                   loss_fn=loss_fn, batch_plan=plan)


def weights(run) -> dict[str, torch.Tensor]:
    model = Tiny()
    load_weights(model, run / "last" / "model.safetensors")
    return model.state_dict()


def losses(run) -> list[float]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(s)["loss"] for s in lines]


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """Inductor's files for this module's compiles, kept from one test to the next."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNKIT_CACHE", str(tmp_path_factory.mktemp("attnkit-cache")))
        torch._dynamo.reset()
        yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def compiled_run(cache, tmp_path_factory):
    """One uninterrupted compiled run."""
    run = tmp_path_factory.mktemp("compiled") / "run"
    trainer(run, config("on")).fit()
    return run


def test_auto_compiles_a_model_that_pays_in_a_long_run_on_a_cpu():
    cpu = torch.device("cpu")
    long = {"steps": AUTO_MIN_STEPS, "max_minutes": None}
    assert resolve_compile("auto", cpu, pays=True, **long)
    assert resolve_compile("auto", cpu, pays=True, steps=AUTO_MIN_STEPS,
                           max_minutes=AUTO_MIN_MINUTES)
    assert not resolve_compile("auto", cpu, pays=False, **long)
    assert not resolve_compile("auto", cpu, pays=True, steps=AUTO_MIN_STEPS - 1,
                               max_minutes=None)
    assert not resolve_compile("auto", cpu, pays=True, steps=AUTO_MIN_STEPS,
                               max_minutes=AUTO_MIN_MINUTES / 2)
    assert not resolve_compile("auto", torch.device("cuda"), pays=True, **long)
    for on in ("on", True):
        assert resolve_compile(on, cpu, pays=False, steps=1, max_minutes=0.1)
    for off in ("off", False):
        assert not resolve_compile(off, cpu, pays=True, **long)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_compile_setting_is_checked(bad):
    with pytest.raises(ValueError, match="TrainConfig.compile"):
        config(bad)


def test_a_compiled_run_is_recorded(compiled_run):
    runtime = json.loads((compiled_run / "config.json").read_text())["runtime"]
    assert runtime["compile_resolved"] is True and "compile_error" not in runtime
    state = json.loads((compiled_run / "last" / "state.json").read_text())
    assert state["state"]["position"]["compiled"] is True


def test_a_seed_fixes_a_compiled_run(compiled_run, tmp_path):
    torch._dynamo.reset()
    trainer(tmp_path / "again", config("on")).fit()
    assert losses(tmp_path / "again") == losses(compiled_run)
    assert same(weights(tmp_path / "again"), weights(compiled_run))


def test_a_compiled_run_resumed_ends_as_the_uninterrupted_one(compiled_run, tmp_path):
    # The run dies collating step 11's batch (epoch 2) after its checkpoint at step 9; the new
    # process starts on step 10, whose batch has another shape than the run's first.
    calls = {"n": 0}

    def dying(rows):
        calls["n"] += 1
        if calls["n"] == 11:
            raise RuntimeError("killed")
        return collate(rows)

    cut = tmp_path / "cut"
    with pytest.raises(RuntimeError, match="killed"):
        trainer(cut, config("on"), collate_fn=dying).fit()
    first = collate([data()[i] for i in plan(0, 3)[0]])[0].shape
    resumed_first = collate([data()[i] for i in plan(1, 3)[1]])[0].shape
    assert first != resumed_first
    torch._dynamo.reset()
    result = trainer(cut, config("on")).fit(resume=True)
    assert result.global_step == 2 * len(SIZES)
    assert losses(cut) == losses(compiled_run)
    assert same(weights(cut), weights(compiled_run))


def test_a_compile_that_fails_falls_back_to_eager_with_one_warning(cache, tmp_path, capsys):
    eager = tmp_path / "eager"
    trainer(eager, config("off")).fit()
    torch._dynamo.reset()
    failing = tmp_path / "failing"
    with torch._inductor.config.patch({"cpp.cxx": ("/no/such/compiler",),
                                       "force_disable_caches": True}):
        trainer(failing, config("on")).fit()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "could not be compiled" in warnings[0], warnings
    assert losses(failing) == losses(eager)
    assert same(weights(failing), weights(eager))
    runtime = json.loads((failing / "config.json").read_text())["runtime"]
    assert runtime["compile_resolved"] is False and runtime["compile_error"]
    state = json.loads((failing / "last" / "state.json").read_text())
    assert state["state"]["position"]["compiled"] is False


def test_an_error_of_the_step_itself_is_raised_not_taken_for_a_compile(cache, tmp_path, capsys):
    def broken(model, batch):
        raise ValueError("a bad batch")

    seed_everything(0)
    t = Trainer(Tiny(), config("on"), tmp_path, train_dataset=data(), collate_fn=collate,
                loss_fn=broken, batch_plan=plan)
    with pytest.raises(ValueError, match="a bad batch"):
        t.fit()
    assert "could not be compiled" not in capsys.readouterr().err


def test_a_cache_that_cannot_be_made_falls_back_to_eager(cache, tmp_path, monkeypatch, capsys):
    # (a full disk, a file where the folder should be): a warning, not a crash
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "file" / "cache"))
    eager = tmp_path / "eager"
    trainer(eager, config("off")).fit()
    failing = tmp_path / "failing"
    trainer(failing, config("on")).fit()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "could not be compiled" in warnings[0], warnings
    assert same(weights(failing), weights(eager))
