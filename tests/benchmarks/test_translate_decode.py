"""The decoding benchmark's engines and table, on a tiny untrained model (no run folder)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from attnkit.apps import Loaded
from attnkit.apps.translate.pipeline import TranslatePipeline, source_limit
from attnkit.data.text_codec import TextCodec
from attnkit.data.vocab import Vocab
from attnkit.models import RNNSeq2Seq, RNNSeq2SeqConfig, TransformerConfig, TransformerSeq2Seq

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "translate_decode.py"
WORDS = ["a", "b", "c", "d", "e", "f"]


def _bench():
    spec = importlib.util.spec_from_file_location("translate_decode", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(model_cls, config_cls, **kw):
    """What ``load_run`` returns, for an untrained model (no run folder)."""
    torch.manual_seed(0)
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>"] + WORDS)
    model = model_cls(config_cls(src_vocab=len(vocab), tgt_vocab=len(vocab), **kw)).eval()
    pipeline = TranslatePipeline(TextCodec(), vocab, vocab, source_limit(model.config))
    return Loaded(Path("."), "translate", model, pipeline, {})


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("batch", [1, 2, "all"])
def test_cached_and_uncached_engines_agree_and_rows_are_measured(batch):
    bench = _bench()
    run = _run(TransformerSeq2Seq, TransformerConfig, d_model=16, heads=2, layers=2, ff_dim=32)
    ids = [[4, 5, 6], [7, 8], [9]]
    refs = ["a b", "c", "d e f"]
    engines = [("attnkit-uncached", bench.attnkit_engine(run, 5, False)),
               ("attnkit", bench.attnkit_engine(run, 5, True)), ("ctranslate2-int8", "no reason")]
    rows = bench.measure(engines, 5, batch, ids, refs, rounds=2)
    assert bench.attnkit_engine(run, 5, False)(ids) == bench.attnkit_engine(run, 5, True)(ids)
    for row in rows[:2]:
        assert row["batch"] == batch and row["sent_per_s"] > 0 and row["spread"] >= 1.0
        assert 0 <= row["bleu"] <= 100
    assert rows[0]["bleu"] == rows[1]["bleu"]
    assert rows[2] == {"engine": "ctranslate2-int8", "beam": 5, "batch": batch,
                       "sent_per_s": None, "bleu": None, "skipped": "no reason"}


def test_calls_hold_the_batch_and_ratios_are_against_ctranslate2_float32():
    bench = _bench()
    calls = []

    def decode(ids):
        calls.append(len(ids))
        return [str(i) for i in ids]
    assert bench.in_calls(decode, 2)([[1], [2], [3]]) == ["[1]", "[2]", "[3]"]
    assert calls == [2, 1]
    assert bench.in_calls(decode, "all") is decode
    rows = [{"engine": "ctranslate2-float32", "beam": 1, "batch": 32, "sent_per_s": 400.0},
            {"engine": "attnkit", "beam": 1, "batch": 32, "sent_per_s": 300.0},
            {"engine": "attnkit", "beam": 5, "batch": 32, "sent_per_s": 100.0},
            {"engine": "ctranslate2-int8", "beam": 1, "batch": 32, "sent_per_s": None,
             "skipped": "x"}]
    bench.compare(rows)
    assert [r["vs_ct2"] for r in rows] == [1.0, 0.75, None, None]
    with pytest.raises(Exception, match="'all'"):
        bench.parse_batch("0")


def test_rnn_runs_are_not_exported(tmp_path):
    bench = _bench()
    run = _run(RNNSeq2Seq, RNNSeq2SeqConfig, emb_dim=8, hidden=8)
    assert "Transformers only" in bench.ct2_translators(run, tmp_path, 1)
    info = bench.machine()
    assert info["threads"] == torch.get_num_threads() and info["isa"]
    assert bench.machine_text(info).startswith("machine: ")
    assert "ctranslate2" in info
