"""``TransformerConfig(share_embeddings=True)``: one table for source, target and output."""

import pytest
import torch

from attnkit.models import TransformerConfig, TransformerSeq2Seq, build_model
from attnkit.training import load_weights
from attnkit.training.checkpoint import save_weights

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 12


def make(share: bool) -> TransformerSeq2Seq:
    torch.manual_seed(0)
    return TransformerSeq2Seq(TransformerConfig(
        src_vocab=VOCAB, tgt_vocab=VOCAB, d_model=16, heads=2, layers=1, ff_dim=32,
        dropout=0.0, share_embeddings=share)).eval()


def test_one_table_for_source_target_and_output():
    shared, separate = make(True), make(False)
    assert shared.src_embedding.weight is shared.tgt_embedding.weight is shared.out.weight
    n_shared = sum(p.numel() for p in shared.parameters())
    n_separate = sum(p.numel() for p in separate.parameters())
    assert n_separate - n_shared == VOCAB * 16     # exactly one embedding table fewer
    # A gradient through the source side reaches the shared table too.
    src = torch.tensor([[4, 5, 6]])
    logits = shared(src, torch.tensor([3]), torch.tensor([[1, 7]]))
    logits.sum().backward()
    assert shared.src_embedding.weight.grad[4:7].abs().sum() > 0


def test_needs_one_vocabulary_and_round_trips(tmp_path):
    with pytest.raises(ValueError, match="src_vocab 12 != tgt_vocab 13"):
        TransformerConfig(src_vocab=12, tgt_vocab=13, share_embeddings=True)
    model = make(True)
    save_weights(model, tmp_path / "w.safetensors", {})
    again = build_model(model.config.to_dict()).eval()
    load_weights(again, tmp_path / "w.safetensors")
    assert again.src_embedding.weight is again.tgt_embedding.weight
    src, lens, tgt = torch.tensor([[4, 5, 6]]), torch.tensor([3]), torch.tensor([[1, 7, 8]])
    torch.testing.assert_close(again(src, lens, tgt), model(src, lens, tgt))


def test_old_configs_without_the_field_still_load():
    data = make(False).config.to_dict()
    del data["share_embeddings"]                 # config.json written before the option
    assert build_model(data).config.share_embeddings is False
