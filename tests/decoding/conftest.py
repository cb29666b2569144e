"""Models briefly trained on the toy task (``toy`` fixture in tests/conftest.py)."""

import pytest
import torch


@pytest.fixture(scope="module")
def trained_models(toy):
    """An RNN (additive) and a Transformer, briefly trained on toy pairs (so they emit EOS)."""
    from attnkit.models import RNNSeq2Seq, RNNSeq2SeqConfig, TransformerConfig, TransformerSeq2Seq
    from attnkit.models.losses import masked_cross_entropy

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    models = {
        "rnn": RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab=12, tgt_vocab=12, emb_dim=16, hidden=32,
                                           dropout=0.0)),
        "rnn-luong-lstm": RNNSeq2Seq(RNNSeq2SeqConfig(
            src_vocab=12, tgt_vocab=12, emb_dim=16, hidden=32, dropout=0.0, cell="lstm",
            style="luong", attention="general")),
        "transformer": TransformerSeq2Seq(TransformerConfig(
            src_vocab=12, tgt_vocab=12, d_model=32, heads=2, layers=1, ff_dim=64, dropout=0.0)),
    }
    src, src_len, tgt_in, tgt_out = toy.batch(toy.pairs(64, 12, seed=11))
    for model in models.values():
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(30):  # half-trained on purpose: beams then disagree with greedy
            opt.zero_grad()
            loss, _ = masked_cross_entropy(model(src, src_len, tgt_in), tgt_out, pad_id=toy.PAD)
            loss.backward()
            opt.step()
    torch.set_num_threads(before)
    return models
