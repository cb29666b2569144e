"""The tuning benchmark's rows on a tiny untrained Transformer (no run folder, no compile)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from attnkit.apps import Loaded
from attnkit.apps.translate.pipeline import TranslatePipeline, source_limit
from attnkit.data.text_codec import TextCodec
from attnkit.data.vocab import Vocab
from attnkit.models import TransformerConfig, TransformerSeq2Seq

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "decode_tuning.py"


def _bench():
    spec = importlib.util.spec_from_file_location("decode_tuning", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("one_thread")
def test_rows_compare_each_variant_with_float32():
    bench = _bench()
    torch.manual_seed(0)
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c", "d"])
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=len(vocab), tgt_vocab=len(vocab),
                                                 d_model=16, heads=2, layers=1, ff_dim=32)).eval()
    run = Loaded(Path("."), "translate", model,
                 TranslatePipeline(TextCodec(), vocab, vocab, source_limit(model.config)), {})
    models = {name: bench.variant_model(model, name) for name in ("float32", "int8")}
    assert models["float32"] is model and models["int8"] is not model
    ids, refs = [[4, 5, 6], [7], [5, 4]], ["a b", "c", "d"]
    rows = bench.measure(run, models, 1, 2, ids, refs, rounds=2)
    f32, int8 = rows
    assert f32["vs_float32"] == 1.0 and f32["same_as_float32"] == 1.0
    assert int8["sent_per_s"] > 0 and 0.0 <= int8["same_as_float32"] <= 1.0
    assert f32["batch"] == int8["batch"] == 2 and f32["beam"] == 1


@pytest.mark.usefixtures("one_thread")
def test_the_full_softmax_baseline_makes_the_same_choice_while_it_is_set():
    bench = _bench()
    from attnkit.decoding import beam, choice, greedy

    torch.manual_seed(1)
    logits = torch.randn(64, 8002)  # enough rows and chunks for the shortcut to run
    # The five best of each row planted 1.0 apart, at random places: the tokens then compare
    # exactly on any CPU, far beyond rounding. The log-probabilities are one value by two
    # formulas, in float32, in one run: a few float32 ulps of the normaliser (about 10) apart,
    # whichever vector kernels the CPU takes (AVX2, AVX512; AMX does no elementwise work).
    places = torch.rand(64, 8002).argsort(dim=-1)[:, :5]
    logits.scatter_(1, places, torch.tensor([10.0, 9.0, 8.0, 7.0, 6.0]).expand(64, 5))
    for k in (1, 4):
        base, ours = bench.full_softmax_choice(logits, k), choice.best_tokens(logits, k)
        assert torch.equal(base[1], ours[1])
        torch.testing.assert_close(base[0], ours[0], rtol=0, atol=1e-5)
    with bench.setting("full-softmax"):
        assert greedy.best_tokens is beam.best_tokens is bench.full_softmax_choice
    assert greedy.best_tokens is beam.best_tokens is choice.best_tokens
