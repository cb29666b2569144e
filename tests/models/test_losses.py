import math

import pytest
import torch
import torch.nn.functional as F

from attnkit.models.losses import alignment_loss, masked_cross_entropy

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 1 thread is fastest


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, 7, generator=g)
    targets = torch.randint(1, 7, (3, 5), generator=g)
    targets[0, 3:] = 0
    targets[2, 1:] = 0
    return logits, targets


def test_padding_logits_do_not_matter():
    logits, targets = _data()
    loss, count = masked_cross_entropy(logits, targets, pad_id=0)
    changed = logits.clone()
    changed[targets == 0] = torch.randn_like(changed[targets == 0]) * 100
    loss2, _ = masked_cross_entropy(changed, targets, pad_id=0)
    assert count == int((targets != 0).sum())
    torch.testing.assert_close(loss, loss2)


def test_gradient_zero_at_padding():
    logits, targets = _data()
    logits.requires_grad_(True)
    loss, _ = masked_cross_entropy(logits, targets, pad_id=0, label_smoothing=0.1)
    loss.backward()
    assert logits.grad[targets == 0].abs().max() == 0
    assert logits.grad[targets != 0].abs().max() > 0


def test_mean_over_real_tokens_matches_manual_sum():
    logits, targets = _data()
    loss, count = masked_cross_entropy(logits, targets, pad_id=0)
    total = 0.0
    for b in range(3):
        for t in range(5):
            if targets[b, t] != 0:
                total -= torch.log_softmax(logits[b, t], -1)[targets[b, t]].item()
    assert math.isclose(loss.item(), total / count, rel_tol=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_formula(eps):
    logits, targets = _data(1)
    loss, _ = masked_cross_entropy(logits, targets, pad_id=0, label_smoothing=eps)
    ref = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1), ignore_index=0,
                          label_smoothing=eps)
    torch.testing.assert_close(loss, ref)
    # and by hand: (1 - eps) * nll + eps * mean_v(-log p_v)
    logp = torch.log_softmax(logits, -1)[targets != 0]
    gold = targets[targets != 0]
    by_hand = ((1 - eps) * -logp.gather(1, gold[:, None])[:, 0] - eps * logp.mean(-1)).mean()
    torch.testing.assert_close(loss, by_hand)


def test_bad_input():
    logits, targets = _data()
    with pytest.raises(ValueError, match=r"\[batch, T, V\]"):
        masked_cross_entropy(logits[0], targets, pad_id=0)
    loss, count = masked_cross_entropy(logits, torch.zeros_like(targets), pad_id=0)
    assert count == 0 and loss.item() == 0.0


def test_alignment_loss_by_hand():
    # Row 0 linked to keys 0 and 1 (half each), row 1 to key 2, row 2 unlinked (adds nothing).
    a = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [1.0, 0.0, 0.0]]])
    g = torch.tensor([[[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]])
    want = (-(0.5 * math.log(0.5) + 0.5 * math.log(0.25)) - math.log(0.8)) / 2
    assert alignment_loss(a, g).item() == pytest.approx(want)
    assert alignment_loss(a, torch.zeros_like(g)).item() == 0.0
    # A linked key that the mask zeroed: large but finite, and its gradient too.
    masked = torch.tensor([[[1.0, 0.0]]], requires_grad=True)
    loss = alignment_loss(masked, torch.tensor([[[0.0, 1.0]]]))
    loss.backward()
    assert math.isfinite(loss.item()) and loss.item() > 20 and torch.isfinite(masked.grad).all()
    with pytest.raises(ValueError, match=r"\[batch, T, S\]"):
        alignment_loss(a, g[0])
