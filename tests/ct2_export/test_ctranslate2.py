"""CTranslate2 export: the exported model decodes as attnkit does; bad inputs are refused."""

import math
import sys

import pytest
import torch

from attnkit.ct2_export.ctranslate2 import (
    export_ctranslate2,
    load_translator,
    translate_tokens,
)
from attnkit.decoding import greedy_decode
from attnkit.errors import CheckpointError, UsageError
from attnkit.models import RNNSeq2SeqConfig, TransformerConfig, TransformerSeq2Seq
from attnkit.models.losses import masked_cross_entropy

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest

TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"] + [f"w{i}" for i in range(4, 12)]


def _trained(toy, **kw):
    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=32, heads=2, layers=2,
                            ff_dim=64, dropout=0.0, max_len=64, **kw)
    model = TransformerSeq2Seq(cfg)
    src, src_len, tgt_in, tgt_out = toy.batch(toy.pairs(64, 12, seed=11))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(40):
        opt.zero_grad()
        loss, _ = masked_cross_entropy(model(src, src_len, tgt_in), tgt_out, pad_id=toy.PAD)
        loss.backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("kw", [{"positional": "sinusoidal"},
                                {"positional": "learned", "share_embeddings": True,
                                 "tie_embeddings": False}])
def test_exported_greedy_equals_attnkit_greedy(kw, toy, tmp_path):
    pytest.importorskip("ctranslate2")
    model = _trained(toy, **kw)
    out = export_ctranslate2(model.config.to_dict(), model.state_dict(), TOKENS, TOKENS,
                             tmp_path / "ct2", quantization="float32")
    src, src_len, _, _ = toy.batch(toy.pairs(20, 12, seed=41))
    want = greedy_decode(model, src, src_len, max_len=12)
    # attnkit's toy sources end with <eos> (tests/conftest.py): passed as a token like any other
    sources = [[TOKENS[i] for i in row[:n]] for row, n in zip(src.tolist(), src_len.tolist(),
                                                               strict=True)]
    translator = load_translator(out)
    got = translate_tokens(translator, sources, max_len=12)
    assert [[TOKENS[i] for i in h.tokens] for h in want] == [g.tokens for g in got]
    assert sum(h.ended for h in want) >= 10   # real EOS decisions compared
    # The same numbers: CTranslate2's log-probabilities of attnkit's outputs (<eos> included).
    ended = [i for i, h in enumerate(want) if h.ended]
    scored = translator.score_batch([sources[i] for i in ended], [got[i].tokens for i in ended])
    for i, r in zip(ended, scored, strict=True):
        assert math.isclose(sum(r.log_probs), want[i].score, rel_tol=1e-4, abs_tol=1e-4)


def test_per_sentence_length_limits_as_attnkit(toy, tmp_path):
    pytest.importorskip("ctranslate2")
    torch.manual_seed(1)
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16,
                                                 heads=2, layers=1, ff_dim=32)).eval()
    out = export_ctranslate2(model.config, model.state_dict(), TOKENS, TOKENS, tmp_path / "m",
                             quantization="float32")
    src, src_len, _, _ = toy.batch(toy.pairs(12, 12, seed=42, min_len=1, max_len=9))
    want = greedy_decode(model, src, src_len, max_len_offset=1)
    assert sum(not h.ended for h in want) >= 6   # untrained: most stop at their own limit
    assert len({len(h.tokens) for h in want}) >= 3
    sources = [[TOKENS[i] for i in row[:n]] for row, n in zip(src.tolist(), src_len.tolist(),
                                                               strict=True)]
    got = translate_tokens(load_translator(out), sources, max_len_offset=1, batch_size=5)
    assert [[TOKENS[i] for i in h.tokens] for h in want] == [g.tokens for g in got]



def test_two_workers_keep_input_order(toy, tmp_path):
    """``threads=2`` runs two CPU workers (one thread each) on batches submitted together;
    the outputs still come back in input order, equal to attnkit's."""
    pytest.importorskip("ctranslate2")
    model = _trained(toy)
    out = export_ctranslate2(model.config, model.state_dict(), TOKENS, TOKENS, tmp_path / "w",
                             quantization="float32")
    translator = load_translator(out, threads=2)
    assert translator.num_translators == 2   # inter_threads: workers, not intra-op threads
    src, src_len, _, _ = toy.batch(toy.pairs(30, 12, seed=43, min_len=1, max_len=9))
    want = greedy_decode(model, src, src_len, max_len=12)
    sources = [[TOKENS[i] for i in row[:n]] for row, n in zip(src.tolist(), src_len.tolist(),
                                                               strict=True)]
    got = translate_tokens(translator, sources, max_len=12, batch_size=4)   # 8 batches
    assert [[TOKENS[i] for i in h.tokens] for h in want] == [g.tokens for g in got]
    assert len({len(s) for s in sources}) >= 5   # batches of different lengths, reordered


def test_loading_a_translator_keeps_torch_threads(toy, tmp_path, monkeypatch):
    """CTranslate2 sets the OpenMP thread count to its intra-op threads (1) when a translator
    is built; torch, which reads it, keeps the threads it was given, and loading sets no
    thread count of the process (the translator is built on a thread of its own)."""
    pytest.importorskip("ctranslate2")
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16,
                                                 heads=2, layers=1, ff_dim=32))
    out = export_ctranslate2(model.config, model.state_dict(), TOKENS, TOKENS, tmp_path / "t",
                             quantization="float32")
    torch.set_num_threads(2)   # the one_thread fixture puts 1 back afterwards
    with monkeypatch.context() as m:
        m.setattr(torch, "set_num_threads", lambda n: pytest.fail("a thread count was set"))
        translator = load_translator(out, threads=2)
    assert torch.get_num_threads() == 2 and translator.num_translators == 2


def test_int8_export_translates(toy, tmp_path):
    pytest.importorskip("ctranslate2")
    model = _trained(toy)
    out = export_ctranslate2(model.config, model.state_dict(), TOKENS, TOKENS,
                             tmp_path / "int8", quantization="int8")
    got = translate_tokens(load_translator(out), [["w4", "w5", "<eos>"]], beam=3)
    assert len(got) == 1 and all(t in TOKENS for t in got[0].tokens)


def test_refusals(toy, tmp_path):
    rnn = RNNSeq2SeqConfig(src_vocab=12, tgt_vocab=12).to_dict()
    with pytest.raises(UsageError, match="Transformer runs only"):
        export_ctranslate2(rnn, {}, TOKENS, TOKENS, tmp_path / "a")
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16,
                                                 heads=2, layers=1, ff_dim=32))
    cfg, state = model.config, model.state_dict()
    with pytest.raises(UsageError, match="quantization"):
        export_ctranslate2(cfg, state, TOKENS, TOKENS, tmp_path / "a", quantization="int4")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        export_ctranslate2(cfg, state, TOKENS, TOKENS, full)
    assert (full / "x").read_text() == "keep me"
    with pytest.raises(CheckpointError, match="11 tokens, the model 12"):
        export_ctranslate2(cfg, state, TOKENS, TOKENS[:11], tmp_path / "a")
    del state["out.weight"], state["tgt_embedding.weight"]
    pytest.importorskip("ctranslate2")
    with pytest.raises(CheckpointError, match="missing keys"):
        export_ctranslate2(cfg, state, TOKENS, TOKENS, tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_missing_ctranslate2_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)   # import fails
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=12, tgt_vocab=12, d_model=16,
                                                 heads=2, layers=1, ff_dim=32))
    with pytest.raises(UsageError, match=r"pip install 'attnkit\[serve\]'"):
        export_ctranslate2(model.config, model.state_dict(), TOKENS, TOKENS, tmp_path / "m")
    with pytest.raises(UsageError, match="serve extra"):
        load_translator(tmp_path)
