"""Where each caption word came from in the image, by method: the attention map the model used
to predict it, or gradient x input and integrated gradients (`attnkit.explain.captum`) of the
word's log-probability by the encoder's feature map (the words fed). A gradient map is the
absolute per-cell sum over channels, normalised to sum 1 like attention; one batch row per
(image, word), so one backward pass (or ``steps``) explains a batch."""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.explain.captum import grad_x_input, integrated_gradients
from attnkit.models.captioner import Captioner

METHODS = ("attention", "grad-input", "integrated-gradients")
# Caption words explained in one forward and backward pass (each holds its image's feature
# map): the memory bound of a gradient method, however many images a call explains.
ROWS_A_PASS = 256
IG_STEPS = 32


def _logprob_forward(model: Captioner):
    def forward(features: Tensor, tgt_in: Tensor, gold: Tensor) -> Tensor:
        state = model.encode(None, beams=1, use_cache=True, weights="none",
                             features=features)    # the images are not read again
        logits = model.step(tgt_in, state, weights="none", logits=True).logits
        logp = torch.log_softmax(logits.float(), -1)
        return logp.gather(-1, gold.unsqueeze(-1))[..., 0]            # [rows, T]
    return forward


def word_maps(model: Captioner, images: Tensor, tgt_in: Tensor, tgt_out: Tensor, method: str,
              *, steps: int = IG_STEPS) -> Tensor:
    """``[batch, T, H, W]`` maps (each summing to 1) of the words ``tgt_out`` fed as ``tgt_in``
    (``<bos>`` first) for ``images [batch, 3, S, S]``, by ``method`` (one of `METHODS`).

    Raises:
        ValueError: an unknown method. UsageError: Captum missing for a gradient method.
    """
    if method == "attention":
        with torch.no_grad():
            _, alphas = model(images, tgt_in)
        return alphas.float()
    if method not in METHODS:
        raise ValueError(f"unknown explanation method {method!r}")
    batch, length = tgt_in.shape
    with torch.no_grad():
        feats = model.encoder(images)                                    # [B, C, H, W]
    rows = torch.arange(batch).repeat_interleave(length)
    target = torch.arange(length).repeat(batch).tolist()
    args = (tgt_in[rows], tgt_out[rows])
    forward = _logprob_forward(model)
    if method == "grad-input":
        attr = grad_x_input(forward, feats[rows], target=target, args=args,
                            max_rows=ROWS_A_PASS)
    else:
        attr, _ = integrated_gradients(forward, feats[rows], target=target, args=args,
                                       steps=steps, internal_batch_size=ROWS_A_PASS)
    cells = attr.sum(1).abs().float()                                    # [B*T, H, W]
    cells = cells / cells.flatten(1).sum(-1).clamp_min(1e-12)[:, None, None]
    return cells.view(batch, length, *cells.shape[1:])
