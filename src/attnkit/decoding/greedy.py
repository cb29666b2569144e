"""Greedy decoding of a padded batch of source sentences, whole or one step at a time.

Works with any model of the step API (`attnkit.models.step`). A sentence leaves the batch as
soon as it is finished, so the remaining steps run on the sentences still being decoded only.
`greedy_steps` is the decoder itself, a generator of one `GreedyStep` per decoder step (a server
streams them); `greedy_decode` runs it to the end and returns whole hypotheses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from attnkit.decoding.choice import best_tokens
from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths, weights_wanted
from attnkit.models.step import StepModel


@dataclass
class GreedyStep:
    """One decoder step of `greedy_steps`, for the sentences still in the batch.

    Attributes:
        rows: ``[alive]`` the batch index of each sentence this step decoded.
        tokens, log_probs: the token each chose (EOS included) and its log-probability.
        weights: ``[alive, S]`` attention rows (``"all"``: ``[alive, layers, heads, S]``), padding
            columns included; None when not asked.
        done: per row, True when its sentence leaves the batch after this step.
    """

    rows: Tensor
    tokens: list[int]
    log_probs: list[float]
    weights: Tensor | None
    done: list[bool]


def greedy_steps(model: StepModel, src: Tensor, src_lengths: Tensor, *,
                 max_len_ratio: float = 2.0, max_len_offset: int = 5,
                 max_len: int | None = 200, need_weights: bool | str = True,
                 use_cache: bool = True) -> Iterator[GreedyStep]:
    """`greedy_decode` one step at a time: yields a `GreedyStep` per decoder step.

    Nothing is held across a ``yield`` (each model call runs under ``torch.inference_mode`` on its
    own), so generators may be advanced in turn, from any thread. ValueError for a model in
    training mode (dropout would change the tokens).
    """
    if model.training:
        raise ValueError("greedy_steps needs a model in eval mode (model.eval())")
    weights = weights_wanted(need_weights)
    cfg = model.config
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    with torch.inference_mode():
        state = model.encode(src, src_lengths, beams=1, use_cache=use_cache, weights="none")
    alive = torch.arange(src.shape[0], device=src.device)
    prev = torch.full((src.shape[0], 1), cfg.bos_id, dtype=torch.long, device=src.device)
    for t in range(max(limits)):
        with torch.inference_mode():
            out = model.step(prev, state, weights=weights, logits=True)
            best, nxt = (x[:, 0] for x in best_tokens(out.logits[:, -1], 1))
        state = out.state
        rows, chosen = alive.tolist(), nxt.tolist()
        done = [tok == cfg.eos_id or t + 1 >= limits[b] for b, tok in zip(rows, chosen,
                                                                          strict=True)]
        yield GreedyStep(alive, chosen, best.tolist(), None if out.weights is None
                         else out.weights[:, -1], done)
        keep = [i for i, d in enumerate(done) if not d]
        if not keep:
            return
        if len(keep) < len(rows):  # the finished sentences leave the batch
            index = torch.tensor(keep, device=src.device)
            with torch.inference_mode():
                state = model.reorder(state, index, index)
                alive, nxt = alive.index_select(0, index), nxt.index_select(0, index)
        prev = nxt.unsqueeze(1)


def greedy_decode(model: StepModel, src: Tensor, src_lengths: Tensor, *,
                  max_len_ratio: float = 2.0, max_len_offset: int = 5,
                  max_len: int | None = 200, need_weights: bool | str = True,
                  use_cache: bool = True) -> list[Hypothesis]:
    """The most probable token at every step, for every sentence of ``src [batch, S]`` at once.

    Args:
        src_lengths: ``[batch]`` real source lengths.
        max_len_ratio, max_len_offset, max_len: a sentence stops after
            ``min(ceil(ratio * src_len) + offset, max_len)`` tokens (EOS included).
        need_weights: keep the attention rows (False lets a Transformer run its fused kernels);
            ``"all"``: a Transformer's rows of every layer and head.
        use_cache: incremental decoding (False: the model's uncached reference path).

    Returns:
        One `Hypothesis` per sentence, in batch order.
    """
    eos, batch = model.config.eos_id, src.shape[0]
    tokens: list[list[int]] = [[] for _ in range(batch)]
    total, ended = [0.0] * batch, [False] * batch
    attn_steps: list[Tensor] = []  # per step [batch, ..., S], zeros for finished sentences
    with inference(model):
        for s in greedy_steps(model, src, src_lengths, max_len_ratio=max_len_ratio,
                              max_len_offset=max_len_offset, max_len=max_len,
                              need_weights=need_weights, use_cache=use_cache):
            if (w := s.weights) is not None:
                attn_steps.append(w.new_zeros(batch, *w.shape[1:]).index_copy(0, s.rows, w))
            for b, tok, lp in zip(s.rows.tolist(), s.tokens, s.log_probs, strict=True):
                total[b] += lp
                if tok == eos:
                    ended[b] = True
                else:
                    tokens[b].append(tok)
    attn = torch.stack(attn_steps, 1) if attn_steps else None  # [batch, T, ..., S]
    return [Hypothesis(tokens[b], None if attn is None else
                       attn[b, :len(tokens[b]), ..., :n].float().cpu(), total[b], ended[b])
            for b, n in enumerate(src_lengths.tolist())]
