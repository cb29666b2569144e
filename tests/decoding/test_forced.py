"""Forced decoding: the given target's log-probabilities and attention, against the models'
own teacher-forced forward pass, whatever the batching."""

from __future__ import annotations

import pytest
import torch

from attnkit.decoding.forced import forced_decode


@pytest.mark.parametrize("name", ["rnn", "transformer"])
def test_forced_decoding_matches_the_forward_pass(trained_models, toy, name):
    model = trained_models[name].eval()
    pairs = toy.pairs(5, 12, seed=3)
    out = forced_decode(model, [s for s, _ in pairs], [t for _, t in pairs], batch_size=2)
    for (src, tgt), f in zip(pairs, out, strict=True):
        s = torch.tensor([src])
        tgt_in = torch.tensor([[toy.BOS, *tgt]])
        with torch.no_grad():
            logits, attn = model(s, torch.tensor([len(src)]), tgt_in, need_weights=True)
        logp = torch.log_softmax(logits[0].float(), -1)
        want = logp.gather(-1, torch.tensor([*tgt, toy.EOS])[:, None])[:, 0]
        torch.testing.assert_close(f.logprobs, want, atol=1e-5, rtol=1e-5)
        if name == "rnn":
            assert f.attention.shape == (1, 1, len(tgt) + 1, len(src)) and f.encoder is None
            torch.testing.assert_close(f.attention[0, 0], attn[0], atol=1e-5, rtol=1e-5)
        else:
            layers = torch.stack([w[0] for w in attn])
            torch.testing.assert_close(f.attention, layers, atol=1e-5, rtol=1e-5)
            assert f.encoder.shape == (1, 2, len(src), len(src))
            torch.testing.assert_close(f.encoder.sum(-1), torch.ones(1, 2, len(src)))
    with pytest.raises(ValueError, match="sources but"):
        forced_decode(model, [[4]], [])
