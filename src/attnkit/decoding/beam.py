"""Batched beam search with length penalty over the translation step API.

All ``batch * beam`` hypotheses advance in one model call per step; the decoder state and the
attention history are reordered with ``model.reorder_state`` after every step.

Algorithm (as fairseq's): each step keeps the ``2 * beam`` best extensions of every sentence;
an extension ending in EOS among the first ``beam`` is finished, the first ``beam`` others stay
alive. A sentence is done once it has ``beam`` finished hypotheses, or at its length limit (its
alive hypotheses are then finished as they are). The answer is the finished hypothesis with the
best *normalised* score. With ``beam_size=1`` this is exactly greedy decoding.

Length penalty (the raw score is the total log-probability, EOS included, of ``L`` tokens):

* ``length_norm="gnmt"`` (Wu et al. 2016): ``score / ((5 + L) / 6) ** alpha``;
* ``length_norm="simple"``: ``score / L ** alpha`` (``alpha=1``: mean log-probability per token).

``alpha=0`` compares raw log-probabilities, which favours short outputs.

Example::

    hyps = beam_search(model, src, src_lengths, beam_size=5, alpha=0.6)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths


def normalised_score(score: float, length: int, alpha: float, length_norm: str) -> float:
    """The length-penalised score used to rank finished hypotheses (see module docs)."""
    if length_norm == "gnmt":
        return score / (((5.0 + length) / 6.0) ** alpha)
    if length_norm == "simple":
        return score / (max(length, 1) ** alpha)
    raise ValueError(f"length_norm must be 'gnmt' or 'simple', got {length_norm!r}")


def beam_search(model: nn.Module, src: Tensor, src_lengths: Tensor, *, beam_size: int = 5,
                alpha: float = 0.6, length_norm: str = "gnmt", max_len_ratio: float = 2.0,
                max_len_offset: int = 5, max_len: int | None = 200) -> list[Hypothesis]:
    """Beam search for every sentence of a padded batch at once.

    Args:
        model: a translation model with the step API.
        src: ``[batch, S]`` source ids; ``src_lengths``: ``[batch]``.
        beam_size: hypotheses kept per sentence (1 = greedy).
        alpha, length_norm: the length penalty (module docs).
        max_len_ratio, max_len_offset, max_len: per-sentence length limit, as greedy.

    Returns:
        One :class:`Hypothesis` per sentence (the best one), with the attention rows of the
        chosen hypothesis, ``[len(tokens), src_len]``.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    normalised_score(0.0, 1, alpha, length_norm)  # validates length_norm before any work
    cfg = model.config
    batch, k = src.shape[0], beam_size
    device = src.device
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    src_lens = src_lengths.tolist()
    finished: list[list[tuple[float, float, list[int], Tensor | None, bool]]] = [
        [] for _ in range(batch)]
    done = [False] * batch
    with inference(model):
        state = model.encode(src, src_lengths)
        rows = torch.arange(batch, device=device).repeat_interleave(k)
        state = model.reorder_state(state, rows)
        scores = torch.full((batch, k), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one live hypothesis per sentence at the start
        prev = torch.full((batch * k,), cfg.bos_id, dtype=torch.long, device=device)
        hist = torch.empty(batch * k, 0, dtype=torch.long, device=device)
        attn_hist: Tensor | None = None
        for t in range(max(limits)):
            log_probs, state, w = model.decode_step(prev, state)
            vocab = log_probs.shape[-1]
            if w is not None and attn_hist is None:
                attn_hist = w.new_zeros(batch * k, 0, w.shape[-1])
            cand = (scores.view(-1, 1) + log_probs.float()).view(batch, k * vocab)
            top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=-1)
            top_rows = (top_idx // vocab + torch.arange(batch, device=device).unsqueeze(1) * k)
            top_tok = top_idx % vocab
            top_scores_l, top_rows_l, top_tok_l = (top_scores.tolist(), top_rows.tolist(),
                                                   top_tok.tolist())
            new_scores = torch.full((batch, k), float("-inf"), device=device)
            new_rows = torch.arange(batch * k, device=device).view(batch, k).clone()
            new_tok = torch.full((batch, k), cfg.pad_id, dtype=torch.long, device=device)
            for b in range(batch):
                if done[b]:
                    continue
                at_limit = t + 1 >= limits[b]
                alive = 0
                for j, (s, row, tok) in enumerate(zip(top_scores_l[b], top_rows_l[b],
                                                      top_tok_l[b], strict=True)):
                    if s == float("-inf"):
                        break
                    if tok == cfg.eos_id or at_limit:
                        if j < k and len(finished[b]) < k:
                            ended = tok == cfg.eos_id
                            toks = hist[row].tolist() + ([] if ended else [tok])
                            a = None
                            if attn_hist is not None:
                                a = attn_hist[row]
                                if not ended:
                                    a = torch.cat([a, w[row].unsqueeze(0)], 0)
                                a = a[:, : src_lens[b]].float().cpu()
                            norm = normalised_score(s, t + 1, alpha, length_norm)
                            finished[b].append((norm, s, toks, a, ended))
                    elif alive < k:
                        new_scores[b, alive] = s
                        new_rows[b, alive] = row
                        new_tok[b, alive] = tok
                        alive += 1
                if len(finished[b]) >= k or at_limit or alive == 0:
                    done[b] = True
                    new_scores[b] = float("-inf")
            if all(done):
                break
            index = new_rows.view(-1)
            state = model.reorder_state(state, index)
            hist = torch.cat([hist.index_select(0, index), new_tok.view(-1, 1)], 1)
            if attn_hist is not None:
                attn_hist = torch.cat([attn_hist.index_select(0, index),
                                       w.index_select(0, index).unsqueeze(1)], 1)
            scores = new_scores
            prev = new_tok.view(-1)
    out = []
    for b in range(batch):
        # max() keeps the first of equal scores: the one finished earlier / ranked higher.
        norm, s, toks, a, ended = max(finished[b], key=lambda h: h[0])
        out.append(Hypothesis(toks, a, s, ended))
    return out
