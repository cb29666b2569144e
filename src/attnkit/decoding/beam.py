"""Batched beam search with length penalty over the translation step API.

All ``sentences * beam`` hypotheses advance in one model call per step; the decoder state and
the attention history are reordered with ``model.reorder_state`` after every step, and a
sentence whose search is over leaves the batch then (its rows are not selected again), so long
sentences do not drag finished ones through the remaining steps.

Algorithm (as fairseq's): each step keeps the ``2 * beam`` best extensions of every sentence;
an extension ending in EOS among the first ``beam`` is finished, the first ``beam`` others stay
alive. A sentence is done once it has ``beam`` finished hypotheses, or at its length limit (its
alive hypotheses are then finished as they are). The answer is the finished hypothesis with the
best *normalised* score. With ``beam_size=1`` this is exactly greedy decoding.

Length penalty (the raw score is the total log-probability, EOS included, of ``L`` tokens):

* ``length_norm="gnmt"`` (Wu et al. 2016): ``score / ((5 + L) / 6) ** alpha``;
* ``length_norm="simple"``: ``score / L ** alpha`` (``alpha=1``: mean log-probability per token).

``alpha=0`` compares raw log-probabilities, which favours short outputs.

Example:
    ```python
    hyps = beam_search(model, src, src_lengths, beam_size=5, alpha=0.6)
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths, start, step

# A finished hypothesis: (normalised score, raw score, tokens, attention rows or None, ended).
Finished = tuple[float, float, list[int], Tensor | None, bool]


def normalised_score(score: float, length: int, alpha: float, length_norm: str) -> float:
    """The length-penalised score used to rank finished hypotheses (see module docs)."""
    if length_norm == "gnmt":
        return score / (((5.0 + length) / 6.0) ** alpha)
    if length_norm == "simple":
        return score / (max(length, 1) ** alpha)
    raise ValueError(f"length_norm must be 'gnmt' or 'simple', got {length_norm!r}")


def beam_search(model: nn.Module, src: Tensor, src_lengths: Tensor, *, beam_size: int = 5,
                alpha: float = 0.6, length_norm: str = "gnmt", max_len_ratio: float = 2.0,
                max_len_offset: int = 5, max_len: int | None = 200,
                need_weights: bool | str = True,
                use_cache: bool = True) -> list[Hypothesis]:
    """Beam search for every sentence of a padded batch at once.

    Args:
        model: a translation model with the step API.
        src: ``[batch, S]`` source ids; ``src_lengths``: ``[batch]``.
        beam_size: hypotheses kept per sentence (1 = greedy).
        alpha, length_norm: the length penalty (module docs).
        max_len_ratio, max_len_offset, max_len: per-sentence length limit, as greedy.
        need_weights: keep the attention rows of the hypotheses (None otherwise: no attention
            history is kept and a Transformer runs its fused attention kernels); ``"all"``: a
            Transformer's rows of every layer and head.
        use_cache: incremental decoding (False: the model's uncached reference path).

    Returns:
        One `Hypothesis` per sentence (the best one), with the attention rows of the
        chosen hypothesis, ``[len(tokens), src_len]`` (``"all"``: ``[len(tokens), layers,
        heads, src_len]``).
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    normalised_score(0.0, 1, alpha, length_norm)  # validates length_norm before any work
    batch, k = src.shape[0], beam_size
    device = src.device
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    rules = _Rules(model.config.eos_id, model.config.pad_id, k, alpha, length_norm,
                   src_lengths.tolist())
    finished: list[list[Finished]] = [[] for _ in range(batch)]
    with inference(model):
        state = start(model, src, src_lengths, use_cache)
        state = model.reorder_state(state, torch.arange(batch, device=device).repeat_interleave(k))
        active = list(range(batch))  # the sentences still searched, in row-block order
        scores = torch.full((batch, k), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one live hypothesis per sentence at the start
        prev = torch.full((batch * k,), model.config.bos_id, dtype=torch.long, device=device)
        hist = torch.empty(batch * k, 0, dtype=torch.long, device=device)
        attn_hist: Tensor | None = None
        for t in range(max(limits)):
            log_probs, state, w = step(model, prev, state, need_weights)
            if w is not None and attn_hist is None:
                attn_hist = w.new_zeros(batch * k, 0, *w.shape[1:])
            n, vocab = len(active), log_probs.shape[-1]
            cand = (scores.view(-1, 1) + log_probs.float()).view(n, k * vocab)
            top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=-1)
            top_rows = top_idx // vocab + torch.arange(n, device=device).unsqueeze(1) * k
            beams = _Step(t, top_scores.tolist(), top_rows.tolist(), (top_idx % vocab).tolist(),
                          hist, attn_hist, w)
            kept, new_scores, new_rows, new_tok = [], [], [], []
            for i, b in enumerate(active):
                alive = rules.advance(beams, i, b, limits[b], finished[b])
                if alive is not None:
                    kept.append(b)
                    new_scores += [s for s, _, _ in alive]
                    new_rows += [r for _, r, _ in alive]
                    new_tok += [x for _, _, x in alive]
            if not kept:
                break
            index = torch.tensor(new_rows, device=device)
            state = model.reorder_state(state, index)
            prev = torch.tensor(new_tok, dtype=torch.long, device=device)
            hist = torch.cat([hist.index_select(0, index), prev.unsqueeze(1)], 1)
            if attn_hist is not None:
                attn_hist = torch.cat([attn_hist.index_select(0, index),
                                       w.index_select(0, index).unsqueeze(1)], 1)
            scores = torch.tensor(new_scores, device=device).view(len(kept), k)
            active = kept
    out = []
    for b in range(batch):
        # max() keeps the first of equal scores: the one finished earlier / ranked higher.
        _, s, toks, a, ended = max(finished[b], key=lambda h: h[0])
        out.append(Hypothesis(toks, a, s, ended))
    return out


@dataclass
class _Step:
    """The ``2k`` best extensions of every active sentence at step ``t`` (Python lists; rows
    index the current ``hist [rows, t]``), with the histories they extend and the step's
    attention ``weights [rows, S]`` (``[rows, layers, heads, S]`` for ``"all"``; None when
    not kept)."""

    t: int
    scores: list[list[float]]
    rows: list[list[int]]
    tokens: list[list[int]]
    hist: Tensor
    attn_hist: Tensor | None
    weights: Tensor | None


class _Rules:
    """The per-sentence bookkeeping of the search (module docs): which extensions finish,
    which stay alive, when a sentence is done."""

    def __init__(self, eos_id: int, pad_id: int, k: int, alpha: float, length_norm: str,
                 src_lens: list[int]):
        self.eos_id, self.pad_id, self.k = eos_id, pad_id, k
        self.alpha, self.length_norm, self.src_lens = alpha, length_norm, src_lens

    def advance(self, beams: _Step, i: int, b: int, limit: int,
                finished: list[Finished]) -> list[tuple[float, int, int]] | None:
        """Sentence ``b`` (block ``i`` of the rows): append its finished hypotheses to
        ``finished``; return its ``k`` (score, row, token) to continue, or None when done."""
        k, t = self.k, beams.t
        at_limit = t + 1 >= limit
        alive: list[tuple[float, int, int]] = []
        for j, (s, row, tok) in enumerate(zip(beams.scores[i], beams.rows[i], beams.tokens[i],
                                              strict=True)):
            if s == float("-inf"):
                break
            if tok == self.eos_id or at_limit:
                if j < k and len(finished) < k:
                    finished.append(self._finish(beams, b, s, row, tok))
            elif len(alive) < k:
                alive.append((s, row, tok))
        if len(finished) >= k or at_limit or not alive:
            return None
        # Empty slots: -inf score (never extended), any row of this sentence's block.
        return alive + [(float("-inf"), i * k, self.pad_id)] * (k - len(alive))

    def _finish(self, beams: _Step, b: int, s: float, row: int, tok: int) -> Finished:
        ended = tok == self.eos_id
        toks = beams.hist[row].tolist() + ([] if ended else [tok])
        a = None
        if beams.attn_hist is not None:
            a = beams.attn_hist[row]
            if not ended:
                a = torch.cat([a, beams.weights[row].unsqueeze(0)], 0)
            a = a[..., : self.src_lens[b]].float().cpu()
        norm = normalised_score(s, beams.t + 1, self.alpha, self.length_norm)
        return norm, s, toks, a, ended
