"""Batched beam search with length penalty over the translation step API.

All ``sentences * beam`` hypotheses advance in one model call per step; what a sentence's
hypotheses share is stored once per sentence, and a finished sentence leaves the batch. As
fairseq: each step keeps the ``2 * beam`` best extensions of every sentence; a sentence is done
once it has ``beam`` finished hypotheses or at its length limit; the answer has the best score
normalised by ``length_norm`` (``"gnmt"``: ``/ ((5 + L) / 6) ** alpha``; ``"simple"``:
``/ L ** alpha``; ``alpha=0`` favours short outputs). ``beam_size=1`` is greedy decoding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.attention.kv_cache import GrowingBuffer
from attnkit.decoding.choice import best_tokens
from attnkit.decoding.hypothesis import Hypothesis, inference, max_lengths, weights_wanted
from attnkit.models.step import StepModel

# A finished hypothesis: (normalised score, raw score, tokens, attention rows or None, ended).
Finished = tuple[float, float, list[int], Tensor | None, bool]


def normalised_score(score: float, length: int, alpha: float, length_norm: str) -> float:
    """The length-penalised score used to rank finished hypotheses (see module docs)."""
    if length_norm == "gnmt":
        return score / (((5.0 + length) / 6.0) ** alpha)
    if length_norm == "simple":
        return score / (max(length, 1) ** alpha)
    raise ValueError(f"length_norm must be 'gnmt' or 'simple', got {length_norm!r}")


def beam_search(model: StepModel, src: Tensor, src_lengths: Tensor, *, beam_size: int = 5,
                alpha: float = 0.6, length_norm: str = "gnmt", max_len_ratio: float = 2.0,
                max_len_offset: int = 5, max_len: int | None = 200,
                need_weights: bool | str = True,
                use_cache: bool = True) -> list[Hypothesis]:
    """Beam search for every sentence of ``src [batch, S]`` (``src_lengths [batch]``) at once.

    Args:
        beam_size: hypotheses kept per sentence (1 = greedy).
        alpha, length_norm: the length penalty (module docs).
        max_len_ratio, max_len_offset, max_len, need_weights, use_cache: as `greedy_decode`.

    Returns:
        One `Hypothesis` per sentence (the best one).
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    normalised_score(0.0, 1, alpha, length_norm)  # validates length_norm before any work
    weights = weights_wanted(need_weights)
    batch, k = src.shape[0], beam_size
    limits = max_lengths(src_lengths, max_len_ratio, max_len_offset, max_len)
    search = _Search(model.config.eos_id, model.config.pad_id, k, alpha, length_norm,
                     src_lengths.tolist(), limits, src.device)
    with inference(model):
        state = model.encode(src, src_lengths, beams=k, use_cache=use_cache, weights="none")
        prev = torch.full((batch * k, 1), model.config.bos_id, dtype=torch.long,
                          device=src.device)
        for t in range(max(limits)):
            out = model.step(prev, state, weights=weights, logits=True)
            step_weights = None if out.weights is None else out.weights[:, -1]
            chosen = search.advance(t, out.logits[:, -1], step_weights)
            if chosen is None:
                break
            rows, tokens, sentences = chosen
            state = model.reorder(out.state, rows, sentences)
            prev = tokens.unsqueeze(1)
    return search.best()


class _Search:
    """The bookkeeping of the search (module docs): the live scores and histories of every
    row, which extensions finish, which stay alive, when a sentence is done."""

    def __init__(self, eos_id: int, pad_id: int, k: int, alpha: float, length_norm: str,
                 src_lens: list[int], limits: list[int], device: torch.device):
        self.eos_id, self.pad_id, self.k = eos_id, pad_id, k
        self.alpha, self.length_norm, self.src_lens = alpha, length_norm, src_lens
        n = len(limits)
        self.limits = torch.tensor(limits, device=device)
        self.active = torch.arange(n, device=device)       # the sentences still searched
        self.scores = torch.full((n, k), float("-inf"), device=device)
        self.scores[:, 0] = 0.0  # one live hypothesis per sentence at the start
        self.finished: list[list[Finished]] = [[] for _ in range(n)]
        self.done_count = torch.zeros(n, dtype=torch.long, device=device)
        self.tokens = GrowingBuffer(torch.empty(n * k, 16, dtype=torch.long, device=device), 1)
        self.attention: GrowingBuffer | None = None
        self.slot = torch.arange(2 * k, device=device)

    def advance(self, t: int, logits: Tensor, weights: Tensor | None
                ) -> tuple[Tensor, Tensor, Tensor | None] | None:
        """Step ``t``'s logits ``[rows, V]`` (and attention ``[rows, ...]``) -> ``(rows to
        keep [new_rows], their next tokens, the sentences still searched or None when they are
        all still searched)``, or None when every sentence is done."""
        k, m, vocab = self.k, self.active.shape[0], logits.shape[-1]
        if weights is not None and self.attention is None:
            self.attention = GrowingBuffer(weights.new_empty(
                weights.shape[0], 16, *weights.shape[1:]), 1)
        # A sentence's 2k best extensions are among the 2k best of each of its rows: the
        # hypotheses' scores are added to those only, and the sentence-level choice is over
        # k * 2k candidates, not k * V.
        width = min(2 * k, vocab)
        row_best, row_tokens = best_tokens(logits, width)
        cand = (self.scores.view(-1, 1) + row_best).view(m, k * width)
        # The 2k best extensions of every active sentence, best first: scores [m, 2k], the
        # rows they extend and their tokens.
        c_scores, c_idx = cand.topk(min(2 * k, k * width), dim=-1)
        block = torch.arange(m, device=cand.device).unsqueeze(1) * k
        c_rows, c_tokens = c_idx // width + block, row_tokens.view(m, k * width).gather(1, c_idx)
        slot = self.slot[:c_scores.shape[1]]
        valid = c_scores > float("-inf")
        at_limit = (t + 1 >= self.limits[self.active]).unsqueeze(1)
        ends = (c_tokens == self.eos_id) | at_limit
        # Among the first k, an ending extension finishes while the sentence has room left;
        # the first k extensions that do not end stay alive (candidates are best first).
        finishing = ends & valid & (slot < k)
        finishing &= finishing.cumsum(1) <= (k - self.done_count[self.active]).unsqueeze(1)
        staying = ~ends & valid
        staying &= staying.cumsum(1) <= k
        self.done_count[self.active] += finishing.sum(1)
        done = (self.done_count[self.active] >= k) | at_limit[:, 0] | ~staying.any(1)
        hits = finishing.nonzero().tolist()
        if hits:
            self._finish(t, c_rows.tolist(), c_tokens.tolist(), c_scores.tolist(), hits, weights)
        keep = (~done).nonzero()[:, 0]
        if keep.shape[0] == 0:
            return None
        # The k alive extensions of every sentence, in rank order; an empty slot scores -inf
        # (never extended) and points at a row of its own sentence's block.
        order = torch.where(staying, slot, slot + 2 * k).argsort(dim=1)[:, :k]
        alive = staying.gather(1, order)
        scores = c_scores.gather(1, order).masked_fill(~alive, float("-inf"))
        rows = torch.where(alive, c_rows.gather(1, order), block)
        tokens = torch.where(alive, c_tokens.gather(1, order), self.pad_id)
        sentences = None
        if keep.shape[0] < m:
            sentences = keep
            scores, rows, tokens = scores[keep], rows[keep], tokens[keep]
            self.active = self.active[keep]
        rows, tokens = rows.reshape(-1), tokens.reshape(-1)
        self.scores = scores
        self.tokens.reorder(rows)
        self.tokens.append(tokens.unsqueeze(1))
        if self.attention is not None:
            self.attention.reorder(rows)
            self.attention.append(weights.index_select(0, rows).unsqueeze(1))
        return rows, tokens, sentences

    def _finish(self, t: int, rows: list, tokens: list, scores: list, hits: list[list[int]],
                weights: Tensor | None) -> None:
        """Copy out the hypotheses that finish at step ``t`` (``hits``: their (sentence block,
        candidate) positions among the candidates' ``rows``, ``tokens`` and ``scores``)."""
        history = self.tokens.filled()
        past = None if self.attention is None else self.attention.filled()
        active = self.active.tolist()
        for i, j in hits:
            b, row, tok, score = active[i], rows[i][j], tokens[i][j], scores[i][j]
            ended = tok == self.eos_id
            toks = history[row].tolist() + ([] if ended else [tok])
            rows_of = None
            if past is not None:
                rows_of = past[row]
                if not ended:
                    rows_of = torch.cat([rows_of, weights[row].unsqueeze(0)], 0)
                rows_of = rows_of[..., : self.src_lens[b]].float().cpu()
            norm = normalised_score(score, t + 1, self.alpha, self.length_norm)
            self.finished[b].append((norm, score, toks, rows_of, ended))

    def best(self) -> list[Hypothesis]:
        """The finished hypothesis of best normalised score of every sentence (the first of
        equal scores: the one finished earlier or ranked higher)."""
        best = (max(finished, key=lambda h: h[0]) for finished in self.finished)
        return [Hypothesis(toks, rows, score, ended) for _, score, toks, rows, ended in best]
