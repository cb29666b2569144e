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
def test_cached_and_uncached_engines_agree_and_rows_are_measured():
    bench = _bench()
    run = _run(TransformerSeq2Seq, TransformerConfig, d_model=16, heads=2, layers=2, ff_dim=32)
    ids = [[4, 5, 6], [7, 8], [9]]
    refs = ["a b", "c", "d e f"]
    engines = [("attnkit-uncached", bench.attnkit_engine(run, 5, False)),
               ("attnkit", bench.attnkit_engine(run, 5, True)), ("ctranslate2-int8", "no reason")]
    rows = bench.measure(engines, 5, ids, refs, rounds=2)
    assert bench.attnkit_engine(run, 5, False)(ids) == bench.attnkit_engine(run, 5, True)(ids)
    for row in rows[:2]:
        assert row["sent_per_s"] > 0 and 0 <= row["bleu"] <= 100
    assert rows[0]["bleu"] == rows[1]["bleu"]
    assert rows[2] == {"engine": "ctranslate2-int8", "beam": 5, "sent_per_s": None,
                       "bleu": None, "skipped": "no reason"}
    bench.print_table(rows)
    assert rows[0]["speedup"] == 1.0


def test_rnn_runs_are_not_exported(tmp_path):
    bench = _bench()
    run = _run(RNNSeq2Seq, RNNSeq2SeqConfig, emb_dim=8, hidden=8)
    assert "Transformers only" in bench.ct2_models(run, tmp_path)
    info = bench.machine()
    assert info["threads"] == torch.get_num_threads() and info["isa"]
    assert bench.machine_text(info).startswith("machine: ")
    assert "ctranslate2" in info
