"""Self-attention review classifier: the 2018 Keras model (preset ``keras2018``) and a stronger one.

``keras2018`` is exactly:
    ```python
    Embedding(30000, 128) -> + sinusoidal positions (cos_sin layout) ->
    MultiHeadAttention(8 heads x 16, no bias, no output projection) as self-attention ->
    global max pooling over time -> Dropout(0.5) -> Linear(128, 1) -> sigmoid
    ```

3,889,281 parameters (= 30000*128 + 3*128*128 + 129), as Keras reports.

Padding. The original passed no lengths, so padding was attended and pooled, and its positions
were counted from the first *padding* slot. Here, by default (``mask_padding=True``), padded keys
get zero attention, padded outputs are zero and never win the max pooling, and positions count
from the first real token, so the output of a review does not depend on how much padding
surrounds it. ``mask_padding=False`` reproduces the original. Padding may sit at the start
(``padding="pre"``, Keras' default: real tokens are the LAST ``length`` slots) or the end
(``"post"``); the mask follows that side. Because pre-padding cannot be described by
``key_lengths`` (which mean "the first ``length`` slots are real"), the model passes the
equivalent ``key_mask`` to the attention and zeroes the padded query rows itself.

Speed. With masking, `SentimentClassifier.forward` sorts the batch by length and encodes
it in a few groups (`plan_length_groups`, CPU only), each cut to its longest review, so
padding costs (almost) no compute; the embedding lookup stays one call (one dense gradient). A
group whose reviews all fill it (most of an IMDB batch at maxlen 100) runs without any mask,
its positions the sinusoid table's first rows. With max pooling after plain attention layers
(the 2018 model) the last layer and the pooling run as one kernel
(`MultiHeadAttention.max_pool`), whose backward visits only the query row that won each pooled
feature instead of every row of every head. Both equal the full padded batch through autograd
to float32 rounding (tests/models/test_sentiment_length_groups.py) and the Keras formula
(tests/models/test_sentiment_keras_formula.py). The sinusoid table is a cached, non-persistent
buffer. Many reviews at once: `SentimentClassifier.predict_proba` (`logits_by_length`: sorted
and planned once per call, batches in length order, no weights; for the 2018 model each
token's Q/K/V projection gathered from `SentimentClassifier.projection_tables`);
`SentimentClassifier.attribute` when the weights are wanted.

Per-token explanation (`SentimentClassifier.explain`), a distribution over the real tokens
(sums to 1, zero on padding):

* max pooling: pooled feature ``d`` is ``max_t h[t, d]``, won at one position ``q_d``, and
  weighs ``s_d = |w_d * max_t h[t, d]|`` in the logit (``w`` = classifier weights). Since
  ``h[q_d, d]`` is an attention average of the values, ``h[q, d] = sum_t A[q, t] v[t, d]``, the
  share ``s_d`` is passed back to the tokens by the last attention layer's row ``A[q_d, :]``
  (head ``d // head_dim`` of the 2018 layer): ``score[t] = sum_d s_d A[q_d, t]``, normalised
  over the real tokens. (The winning position alone would mislead: after self-attention every
  position carries the whole review.)
* attention pooling: the pooling weights themselves.

Example:
    ```python
    model = SentimentClassifier(SentimentConfig.keras2018())
    logits = model(ids, lengths)            # ids [batch, time] int64, lengths [batch] -> [batch]
    prob, scores = model.explain(ids, lengths)   # [batch], [batch, time]
    ```
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import Tensor, nn

from attnkit.attention.masking import lengths_to_mask, masked_softmax
from attnkit.attention.multi_head import MultiHeadAttention
from attnkit.attention.pooling import max_pool_projected
from attnkit.positional import SinusoidalPositionalEncoding


@dataclass
class SentimentConfig:
    """Everything that defines a `SentimentClassifier` (saved as JSON in the run).

    Args:
        vocab_size: rows of the token embedding (ids must be ``< vocab_size``).
        embed_dim: token embedding size = model width.
        maxlen: the longest input (learned positions need it).
        num_heads, head_dim: multi-head self-attention; ``num_heads * head_dim`` must equal
            ``embed_dim`` for the residual ``transformer`` blocks.
        num_layers: self-attention layers.
        block: ``"plain"`` (the 2018 layer: attention output replaces the input) or
            ``"transformer"`` (pre-layer-norm residual attention + feed-forward).
        ffn_dim: feed-forward hidden size of transformer blocks.
        positional: ``"sinusoidal"`` (cos_sin layout, summed), ``"learned"`` or ``"none"``.
        pooling: ``"max"`` (global max over time) or ``"attention"`` (learned softmax pooling).
        dropout: before the classifier (0.5 in 2018).
        block_dropout: inside transformer blocks and on the embeddings.
        attn_bias, attn_out_proj: the attention projections' bias and output projection.
        bigram_buckets: if > 0, hashed embeddings of (previous, current) token pairs are added to
            the token embeddings (fastText-style local order); 0 = off.
        mask_padding: exclude padding from attention, pooling and positions (see module doc).
        padding: ``"pre"`` or ``"post"``: where the inputs' padding is.
    """

    vocab_size: int = 30000
    embed_dim: int = 128
    maxlen: int = 100
    num_heads: int = 8
    head_dim: int = 16
    num_layers: int = 1
    block: str = "plain"
    ffn_dim: int = 256
    positional: str = "sinusoidal"
    pooling: str = "max"
    dropout: float = 0.5
    block_dropout: float = 0.0
    attn_bias: bool = False
    attn_out_proj: bool = False
    bigram_buckets: int = 0
    mask_padding: bool = True
    padding: str = "pre"

    @classmethod
    def keras2018(cls, **overrides) -> SentimentConfig:
        """The 2018 Keras model (see the module doc); ``overrides`` change single fields."""
        return cls(**overrides)

    @classmethod
    def from_dict(cls, obj: dict) -> SentimentConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(obj) - known
        if unknown:
            raise ValueError(f"unknown SentimentConfig fields {sorted(unknown)}")
        return cls(**obj)

    def to_dict(self) -> dict:
        return asdict(self)

    def check(self) -> None:
        choices = {"block": ("plain", "transformer"), "positional": ("sinusoidal", "learned",
                   "none"), "pooling": ("max", "attention"), "padding": ("pre", "post")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.block == "transformer" and self.num_heads * self.head_dim != self.embed_dim:
            raise ValueError(f"transformer blocks need num_heads * head_dim == embed_dim, got "
                             f"{self.num_heads} * {self.head_dim} != {self.embed_dim}")
        if not self.attn_out_proj and self.num_heads * self.head_dim != self.embed_dim \
                and self.num_layers > 1:
            raise ValueError("without an output projection, stacked layers need "
                             "num_heads * head_dim == embed_dim")


# `SentimentClassifier.logits_by_length` gathers the 2018 model's projections from tables
# (`SentimentClassifier.projection_tables`) from this many tokens per word of the vocabulary.
# The tables cost a projection of the whole vocabulary (23 ms for 30000 words); a token's
# gathered rows cost about a third of its own projection (1.3 against 3.4 ms for 64 x 100
# tokens, the lookup and the positions included; 2 threads, Intel Xeon, AVX512), so they pay
# from ~2.3 tokens per word.
TABLE_TOKENS_PER_WORD = 4


class _EmbeddingLookup(torch.autograd.Function):
    """``weight[ids]`` whose backward builds the dense ``[vocab, dim]`` gradient as zeros plus
    one ``index_add_``: 0.8 ms against 1.25 ms for ``embedding_dense_backward`` (30000 x 128,
    6,400 ids, 2 threads, AVX2), which scans every id once per thread."""

    @staticmethod
    def forward(ctx, ids: Tensor, weight: Tensor) -> Tensor:
        flat = ids.reshape(-1)
        ctx.save_for_backward(flat)
        ctx.rows = weight.shape[0]
        return weight.index_select(0, flat).view(*ids.shape, weight.shape[1])

    @staticmethod
    def backward(ctx, grad: Tensor):
        (flat,) = ctx.saved_tensors
        grad = grad.reshape(flat.shape[0], -1)
        out = grad.new_zeros(ctx.rows, grad.shape[1])
        return None, out.index_add_(0, flat, grad)


def check_ids(ids: Tensor, rows: int) -> None:
    """Raise unless ``ids`` are integers in ``0..rows - 1`` (ValueError for the dtype,
    IndexError for the range)."""
    if ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"ids must be integers, got {ids.dtype}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows):
        raise IndexError(f"ids must lie in 0..{rows - 1}, got "
                         f"{int(ids.min())}..{int(ids.max())}")


def embedding_lookup(ids: Tensor, weight: Tensor) -> Tensor:
    """``ids [...]`` int64 -> ``weight[ids]`` ``[..., dim]``, as ``F.embedding`` (no padding
    index, no max norm) with a faster dense gradient (see `_EmbeddingLookup`)."""
    check_ids(ids, weight.shape[0])
    return _EmbeddingLookup.apply(ids.long(), weight)


class _TransformerBlock(nn.Module):
    """Pre-LN block: ``x + Attn(LN(x))`` then ``x + FFN(LN(x))``; ``[batch, time, dim]``."""

    def __init__(self, cfg: SentimentConfig):
        super().__init__()
        d = cfg.embed_dim
        self.norm1 = nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, num_heads=cfg.num_heads, head_dim=cfg.head_dim,
                                       bias=cfg.attn_bias, out_proj=cfg.attn_out_proj,
                                       dropout=cfg.block_dropout)
        self.norm2 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, cfg.ffn_dim), nn.GELU(),
                                 nn.Dropout(cfg.block_dropout), nn.Linear(cfg.ffn_dim, d))
        self.drop = nn.Dropout(cfg.block_dropout)

    def forward(self, x: Tensor, key_mask: Tensor | None, need_weights: bool = False):
        h = self.norm1(x)
        out = self.attn(h, h, key_mask=key_mask, need_weights=need_weights)
        x = x + self.drop(out.context)
        x = x + self.drop(self.ffn(self.norm2(x)))
        return x, out.weights


class SentimentClassifier(nn.Module):
    """Binary review classifier built from self-attention (see the module doc).

    Args:
        config: a `SentimentConfig`.

    Call:
        ``forward(ids, lengths) -> logits``; the probability of "positive" is
        ``sigmoid(logits)``.

    Shapes:
        ``ids [batch, time]`` int64 (``time <= config.maxlen`` for learned positions),
        ``lengths [batch]`` int64 real tokens per row -> ``logits [batch]``.
    """

    def __init__(self, config: SentimentConfig):
        super().__init__()
        config.check()
        self.config = cfg = config
        d = cfg.embed_dim
        self.embedding = nn.Embedding(cfg.vocab_size, d)
        self.bigram = nn.Embedding(cfg.bigram_buckets, d) if cfg.bigram_buckets > 0 else None
        self.sinusoid = SinusoidalPositionalEncoding(d, mode="sum", layout="cos_sin") \
            if cfg.positional == "sinusoidal" else None
        # The sinusoid table, computed once (cos/sin of every position each step cost ~1 ms);
        # grown on demand for longer inputs. Not persistent: checkpoints stay as they were.
        table = self.sinusoid.encoding(cfg.maxlen) if self.sinusoid is not None else None
        self.register_buffer("pos_table", table, persistent=False)
        self.learned_pos = nn.Embedding(cfg.maxlen, d) if cfg.positional == "learned" else None
        if self.learned_pos is not None:
            nn.init.normal_(self.learned_pos.weight, std=0.02)
        self.embed_drop = nn.Dropout(cfg.block_dropout)
        if cfg.block == "plain":
            width = d
            layers = []
            for _ in range(cfg.num_layers):
                layers.append(MultiHeadAttention(width, num_heads=cfg.num_heads,
                                                 head_dim=cfg.head_dim, bias=cfg.attn_bias,
                                                 out_proj=cfg.attn_out_proj))
                width = d if cfg.attn_out_proj else cfg.num_heads * cfg.head_dim
            self.layers = nn.ModuleList(layers)
            self.final_norm = None
        else:
            width = d
            self.layers = nn.ModuleList(_TransformerBlock(cfg) for _ in range(cfg.num_layers))
            self.final_norm = nn.LayerNorm(d)
        self.width = width
        self.pool_score = nn.Linear(width, 1) if cfg.pooling == "attention" else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(width, 1)
        self._keras_init()

    def _keras_init(self) -> None:
        """Keras' defaults, which the 2018 numbers were trained from: embeddings
        uniform(-0.05, 0.05) (torch's N(0, 1) would swamp the unit-size sinusoids), dense
        layers Glorot-uniform with zero bias (the attention layer does this itself)."""
        for emb in (self.embedding, self.bigram):
            if emb is not None:
                nn.init.uniform_(emb.weight, -0.05, 0.05)
        nn.init.xavier_uniform_(self.classifier.weight)
        nn.init.zeros_(self.classifier.bias)

    # ------------------------------------------------------------------ pieces
    def real_mask(self, lengths: Tensor, time: int) -> Tensor:
        """``[batch, time]`` bool, True at real tokens (the last ``length`` slots for "pre")."""
        mask = lengths_to_mask(lengths, time, name="lengths")
        return mask.flip(-1) if self.config.padding == "pre" else mask

    def _positions(self, mask: Tensor) -> Tensor:
        """``[batch, time]`` positions: from the first real token (masked) or the first slot."""
        if not self.config.mask_padding:
            return torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        return (mask.long().cumsum(-1) - 1).clamp_min(0)

    def _sinusoid_table(self, time: int, like: Tensor) -> Tensor:
        """``[>= time, dim]`` sinusoids on ``like``'s device and dtype (the cached buffer)."""
        table = self.pos_table
        if table.shape[0] < time or table.device != like.device or table.dtype != like.dtype:
            table = self.sinusoid.encoding(max(time, table.shape[0]), device=like.device,
                                           dtype=like.dtype)
            self.pos_table = table  # a pure function of (length, device, dtype): no call state
        return table

    def _bigram_ids(self, ids: Tensor, mask: Tensor | None) -> Tensor | None:
        """``[batch, time]`` hashed (previous, current) pair ids, or None without bigrams;
        ``mask`` None: every slot is real."""
        if self.bigram is None:
            return None
        prev = torch.nn.functional.pad(ids[:, :-1], (1, 0))
        if self.config.mask_padding and mask is not None:  # a first real token's previous is 0
            prev = prev * torch.nn.functional.pad(mask[:, :-1], (1, 0))
        # A fixed multiplicative hash of the id pair; collisions only share a vector.
        return (prev * 1_000_003 + ids) % self.config.bigram_buckets

    def _lookup(self, ids: Tensor, bigram_ids: Tensor | None) -> Tensor:
        """Token (+ bigram) vectors ``[..., dim]`` for ids of any shape."""
        x = embedding_lookup(ids, self.embedding.weight)
        return x if bigram_ids is None else x + embedding_lookup(bigram_ids, self.bigram.weight)

    def _embed(self, ids: Tensor, mask: Tensor | None, tokens: Tensor | None = None) -> Tensor:
        """``ids [batch, time]`` -> ``[batch, time, dim]``; ``tokens`` = the looked-up vectors
        when the caller already has them; ``mask`` None: every slot is real."""
        x = self._lookup(ids, self._bigram_ids(ids, mask)) if tokens is None else tokens
        if self.sinusoid is None and self.learned_pos is None:
            return self.embed_drop(x)
        time = ids.shape[1]
        if mask is None or not self.config.mask_padding:
            # Every row has positions 0..time-1: the table's first rows, added by broadcasting
            # rather than gathered row by row ([batch, time, dim] fewer to write and read).
            pos = torch.arange(time, device=ids.device) if self.learned_pos is not None \
                else None
        else:
            pos = self._positions(mask)
        if self.sinusoid is not None:
            table = self._sinusoid_table(time, x)
            x = x + (table[:time] if pos is None else table[pos])
        else:
            x = x + self.learned_pos(pos)
        return self.embed_drop(x)

    @staticmethod
    def _check_shapes(ids: Tensor, lengths: Tensor) -> None:
        if ids.dim() != 2 or lengths.dim() != 1 or lengths.shape[0] != ids.shape[0]:
            raise ValueError(f"ids must be [batch, time] and lengths [batch], got "
                             f"{tuple(ids.shape)} and {tuple(lengths.shape)}")

    def _encode(self, ids: Tensor, lengths: Tensor, need_weights: bool = False,
                tokens: Tensor | None = None, pooled: bool = False, full: bool = False):
        """-> ``(x [batch, time, width], mask, weights)``; with ``pooled`` (only where
        `_fused_pool` holds) ``x`` is already the max-pooled ``[batch, width]``, and the mask
        None when ``full``: the caller knows that every row is ``time`` long (a length group
        without padding), so no mask is built, applied or checked."""
        self._check_shapes(ids, lengths)
        mask = None if full else self.real_mask(lengths, ids.shape[1])
        key_mask = mask if self.config.mask_padding else None
        x = self._embed(ids, mask, tokens)
        weights = []
        layers = list(self.layers)
        if pooled:
            *layers, last = layers
        for layer in layers:
            if isinstance(layer, _TransformerBlock):
                x, w = layer(x, key_mask, need_weights)
            else:
                out = layer(x, x, key_mask=key_mask, need_weights=need_weights)
                x, w = out.context, out.weights
            if key_mask is not None:
                x = x * key_mask.unsqueeze(-1)  # padded query rows carry nothing forward
            weights.append(w)
        if pooled:
            return last.max_pool(x, key_mask=key_mask, query_mask=key_mask), mask, weights
        if self.final_norm is not None:
            x = self.final_norm(x)
        if mask is None:
            mask = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
        return x, mask, weights

    def _fused_pool(self) -> bool:
        """Whether the last attention layer and the max pooling can run as one
        `MultiHeadAttention.max_pool` (plain layers, max pooling; weights not asked)."""
        return self.config.block == "plain" and self.pool_score is None

    def _pool(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """-> pooled ``[batch, width]`` and per-position scores ``[batch, time]`` (see doc)."""
        pool_mask = mask if self.config.mask_padding else torch.ones_like(mask)
        if self.pool_score is not None:
            w = masked_softmax(self.pool_score(x).squeeze(-1), pool_mask)
            return torch.einsum("bt,btd->bd", w, x), w
        filled = x.masked_fill(~pool_mask.unsqueeze(-1), torch.finfo(x.dtype).min)
        pooled, winners = filled.max(dim=1)  # [batch, width], argmax over time per feature
        # An empty review has no real token: pool to zeros rather than finfo.min.
        pooled = pooled * pool_mask.any(-1, keepdim=True)
        return pooled, winners

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        if self.config.mask_padding and ids.numel():
            pooled = self._pool_by_length(ids, lengths)
        elif self._fused_pool() and ids.numel():
            pooled = self._encode(ids, lengths, pooled=True)[0]
        else:
            x, mask, _ = self._encode(ids, lengths)
            pooled, _ = self._pool(x, mask)
        return self._head(pooled)

    def _head(self, pooled: Tensor) -> Tensor:
        """Pooled ``[batch, width]`` -> logits ``[batch]`` (dropout, then the classifier)."""
        return self.classifier(self.dropout(pooled)).squeeze(-1)

    # Length groups of a CPU batch in masked mode (see _pool_by_length and plan_length_groups):
    # at most this many, of at least this many rows. On a GPU a batch is one group (the many
    # small kernels of several groups are launch-bound there).
    length_groups = 6
    min_group_rows = 8

    def _pool_by_length(self, ids: Tensor, lengths: Tensor,
                        sorted_lengths: list[int] | None = None,
                        tables: tuple[Tensor, Tensor | None] | None = None) -> Tensor:
        """Masked mode: ``ids [batch, time]`` -> pooled ``[batch, width]`` in input order.

        Rows sorted by length are encoded in a few groups (`plan_length_groups`), each
        cut to its longest row, so padding costs (almost) no compute (attention work grows with
        length squared); a group whose rows all fill its slots runs without a mask. Exact: with
        masking a review's output does not depend on its padding (module doc). Dropout is
        applied later on the whole batch, so the random stream does not depend on grouping.

        ``sorted_lengths``: the rows' lengths, already validated and in ascending order
        (`logits_by_length`), as Python ints: the batch is then neither sorted nor masked here.
        ``tables``: `projection_tables` (inference): each group is pooled from them.
        """
        if sorted_lengths is None:
            self._check_shapes(ids, lengths)
        batch, time = ids.shape
        order = None
        if sorted_lengths is None:
            mask = self.real_mask(lengths, time)  # validates lengths before they pick columns
            bigram_ids = self._bigram_ids(ids, mask)
            if ids.device.type == "cpu":  # (on a GPU, reading the lengths would wait for it)
                order = torch.argsort(lengths, stable=True)
                sorted_lengths = lengths[order].tolist()
        else:
            bigram_ids = self._bigram_ids(
                ids, None if sorted_lengths[0] == time else self.real_mask(lengths, time))
        sizes = [batch]
        if ids.device.type == "cpu" and batch >= 2 * self.min_group_rows:
            sizes = plan_length_groups(sorted_lengths, max_groups=self.length_groups,
                                       min_rows=self.min_group_rows)
        if len(sizes) == 1:
            order = None  # one group: the rows stay in input order
        cut = []  # (ids, bigram ids, lengths, no padding) per group, cut to its longest row
        start = 0
        for size in sizes:
            rows = slice(start, start + size) if order is None else order[start:start + size]
            if sorted_lengths is None:  # a GPU batch, one group
                shortest, longest = None, int(lengths.max())
            else:
                shortest, longest = sorted_lengths[start], sorted_lengths[start + size - 1]
            keep = max(longest, 1)  # an all-empty group keeps one (padding) slot
            cols = slice(time - keep, None) if self.config.padding == "pre" else slice(0, keep)
            cut.append(tuple(None if t is None else t[rows][:, cols] for t in (ids, bigram_ids))
                       + (lengths[rows], shortest == keep))
            start += size
        if tables is not None:
            parts = [self._pool_projected(sub_ids, sub_len, full, tables)
                     for sub_ids, _, sub_len, full in cut]
        else:
            parts = self._encode_groups(cut)
        pooled = parts[0] if len(parts) == 1 else torch.cat(parts)
        return pooled if order is None else pooled[torch.argsort(order)]  # to the input order

    def _encode_groups(self, cut: list[tuple]) -> list[Tensor]:
        """Pooled ``[rows, width]`` of each length group of `_pool_by_length` (``cut``: ids,
        bigram ids, lengths, no padding), with autograd."""
        # One lookup for all groups: a lookup per group would build (and then sum) one dense
        # [vocab, dim] embedding gradient per group (15 MB each for keras2018).
        if len(cut) == 1:  # (a split, even into one piece, would copy the gradient back)
            vectors = [self._lookup(cut[0][0], cut[0][1])]
        else:
            vectors = self._lookup(torch.cat([c[0].reshape(-1) for c in cut]),
                                   None if cut[0][1] is None else
                                   torch.cat([c[1].reshape(-1) for c in cut])
                                   ).split([c[0].numel() for c in cut])
        parts = []
        fused = self._fused_pool()
        for (sub_ids, _, sub_len, full), tokens in zip(cut, vectors, strict=True):
            x, sub_mask, _ = self._encode(sub_ids, sub_len, pooled=fused, full=full,
                                          tokens=tokens.view(*sub_ids.shape, -1))
            parts.append(x if fused else self._pool(x, sub_mask)[0])
        return parts

    def token_vectors(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The looked-up vectors of the tokens (with their hashed bigrams), ``[batch, time,
        dim]``: what gradient attributions explain the logit by."""
        self._check_shapes(ids, lengths)
        return self._lookup(ids, self._bigram_ids(ids, self.real_mask(lengths, ids.shape[1])))

    def logits_from_vectors(self, vectors: Tensor, ids: Tensor, lengths: Tensor) -> Tensor:
        """``forward`` with the token vectors given (`token_vectors`, or a baseline such as
        zeros): ``[batch]`` logits, differentiable with respect to ``vectors``."""
        x, mask, _ = self._encode(ids, lengths, tokens=vectors)
        pooled, _ = self._pool(x, mask)
        return self.classifier(self.dropout(pooled)).squeeze(-1)

    @torch.no_grad()
    def rollout(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Attention rollout (`attnkit.attention.rollout`) of the stacked layers, read by the
        pooling: ``[batch, time]`` shares over the real tokens (sum 1).

        Each position's share of the decision (the pooling weight, or for max pooling the
        part of ``sum_d |w_d max_t h[t, d]|`` its features won) is passed back to the input
        tokens through every layer's attention averaged over heads, mixed half with the
        identity in residual (transformer) blocks.
        """
        from attnkit.attention.rollout import attention_rollout

        x, mask, attn = self._encode(ids, lengths, need_weights=True)
        pooled, aux = self._pool(x, mask)
        if self.pool_score is not None:
            share = aux * mask
        else:
            term = (self.classifier.weight[0] * pooled).abs()              # [batch, width]
            share = torch.zeros_like(mask, dtype=x.dtype).scatter_add_(1, aux, term) * mask
        residual = 0.5 if self.config.block == "transformer" else 0.0
        scores = torch.einsum("bq,bqt->bt", share, attention_rollout(attn, residual=residual))
        scores = scores * mask
        return scores / scores.sum(-1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def logits_by_length(self, ids: Tensor, lengths: Tensor, *, batch_size: int = 256
                         ) -> Tensor:
        """Logits ``[n]`` of many reviews, in input order, without any attention weights.

        ``ids [n, time]``, ``lengths [n]``. The reviews are taken ``batch_size`` at a time in
        length order, and with masking each batch is cut to its own longest review, so short
        reviews cost no padding; the result equals ``forward`` on the whole input to float32
        rounding. Runs in the model's current mode (``eval()`` for inference).

        For the 2018 model (`projection_tables`), a call of at least `TABLE_TOKENS_PER_WORD`
        tokens per word of the vocabulary gathers each token's Q/K/V projection from tables
        made once for the call instead of projecting every token.
        """
        self._check_shapes(ids, lengths)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.real_mask(lengths, ids.shape[1])  # validate every length before slicing
        n, time = ids.shape
        out = torch.empty(n, dtype=self.classifier.weight.dtype, device=ids.device)
        # Sorted once for the whole call, lengths read to the host once: each batch then knows
        # its longest and shortest review without sorting, masking or reading anything again.
        order = torch.argsort(lengths, stable=True)
        sorted_lengths = lengths[order].tolist()
        tokens = sum(sorted_lengths) if self.config.mask_padding else n * time
        tables = None
        if tokens >= TABLE_TOKENS_PER_WORD * self.config.vocab_size:
            tables = self.projection_tables(time, ids.device)
            if tables is not None:
                check_ids(ids, self.config.vocab_size)  # once, not per batch
        for start in range(0, n, batch_size):
            rows = order[start:start + batch_size]
            sub_ids, sub_len = ids[rows], lengths[rows]
            if self.config.mask_padding and sub_ids.numel():  # (unmasked, padding is input)
                part = sorted_lengths[start:start + batch_size]
                keep = max(part[-1], 1)
                sub_ids = sub_ids[:, time - keep:] if self.config.padding == "pre" \
                    else sub_ids[:, :keep]
                logits = self._head(self._pool_by_length(sub_ids, sub_len, part, tables))
            elif tables is not None and sub_ids.numel():
                logits = self._head(self._pool_projected(sub_ids, sub_len, True, tables))
            else:
                logits = self(sub_ids, sub_len)
            out[rows] = logits.to(out.dtype)
        return out

    def projection_tables(self, time: int, device: torch.device | None = None
                          ) -> tuple[Tensor, Tensor | None] | None:
        """The 2018 model's Q/K/V projection by word and by position, for bulk inference.

        The projection of a token is linear in its vector, the word's embedding plus its
        position's: ``(e + p) W^T + b = (e W^T + b) + p W^T``. So for a single plain attention
        layer feeding the max pooling, a table of every word's projection and one of every
        position's replace the projection matmul of each token by two gathered rows (a matmul
        of the whole vocabulary, once). Built afresh on every call: nothing is kept.

        Args:
            time: positions needed (``ids.shape[1]``).
            device: where the tables are built (the parameters' device by default).

        Returns:
            ``(words [vocab_size, 3 * inner], positions [>= time, 3 * inner] or None without
            positional vectors)``, in the parameters' dtype; None where the shortcut does not
            apply: several or residual layers, attention pooling, an output projection, hashed
            bigrams, embedding dropout in training mode, or under autocast (which projects in
            its own dtype).
        """
        cfg = self.config
        weight = self.embedding.weight
        device = weight.device if device is None else torch.device(device)
        if not (self._fused_pool() and cfg.num_layers == 1 and not cfg.attn_out_proj
                and self.bigram is None and not (self.training and cfg.block_dropout > 0)
                and not torch.is_autocast_enabled(device.type)):
            return None
        layer = self.layers[0]
        proj_weight = layer.in_proj_weight.to(device)
        bias = None if layer.in_proj_bias is None else layer.in_proj_bias.to(device)
        words = torch.nn.functional.linear(weight.to(device), proj_weight, bias)
        if self.sinusoid is not None:
            pos = self._sinusoid_table(time, words)
        elif self.learned_pos is not None:
            if time > cfg.maxlen:
                return None  # the usual path says what is wrong
            pos = self.learned_pos.weight.to(device)
        else:
            return words, None
        return words, torch.nn.functional.linear(pos, proj_weight)

    def _pool_projected(self, ids: Tensor, lengths: Tensor, full: bool,
                        tables: tuple[Tensor, Tensor | None]) -> Tensor:
        """Pooled ``[batch, width]`` of ``ids [batch, time]`` from `projection_tables` (no
        gradient): as `_encode` with ``pooled``, each token's projection gathered. ``full``:
        every row is ``time`` long (or padding is not masked), so positions run from 0."""
        words, positions = tables
        time = ids.shape[1]
        qkv = words.index_select(0, ids.reshape(-1)).view(*ids.shape, -1)
        mask = None if full or not self.config.mask_padding else self.real_mask(lengths, time)
        if positions is not None:
            qkv += positions[:time] if mask is None else positions[self._positions(mask)]
        layer = self.layers[0]
        return max_pool_projected(qkv, num_heads=layer.num_heads, key_mask=mask,
                                  query_mask=mask, scale=1.0 / math.sqrt(layer.head_dim))

    def predict_proba(self, ids: Tensor, lengths: Tensor, *, batch_size: int = 256) -> Tensor:
        """P(positive) ``[n]`` of many reviews (`logits_by_length`, then a sigmoid);
        `attribute` when the per-token weights are wanted too."""
        return torch.sigmoid(self.logits_by_length(ids, lengths, batch_size=batch_size))

    @torch.no_grad()
    def explain(self, ids: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Probability of "positive" ``[batch]`` and per-token scores ``[batch, time]``.

        Scores are a distribution over the real tokens (sum 1, exactly 0 on padding): the
        attention-pooling weights, or for max pooling each pooled feature's share of the logit
        passed back through the last attention layer (see the module doc).
        In the unmasked 2018 mode the winners are taken among the real tokens only, since the
        question asked is which *words* mattered.
        """
        prob, scores, _ = self.attribute(ids, lengths)
        return prob, scores

    @torch.no_grad()
    def attribute(self, ids: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`explain`'s probability ``[batch]`` and scores ``[batch, time]``, plus signed
        contributions ``[batch, time]``: each real token's part of the logit (> 0 pushes
        towards "positive", 0 on padding).

        With masking they sum to ``logit - classifier bias``: attention pooling splits the
        logit exactly, ``a_t * (w . h_t)``; max pooling passes each feature's term
        ``w_d * max_t h[t, d]`` back through the attention row that made it (as the scores do
        with its absolute value).
        """
        x, mask, attn = self._encode(ids, lengths, need_weights=True)
        pooled, aux = self._pool(x, mask)
        prob = torch.sigmoid(self.classifier(pooled).squeeze(-1))
        w = self.classifier.weight[0]
        if self.pool_score is not None:
            scores, signed = aux * mask, aux * (x @ w) * mask
        else:
            filled = x.masked_fill(~mask.unsqueeze(-1), torch.finfo(x.dtype).min)
            top, winners = filled.max(dim=1)  # [batch, width]: value, winning position per feature
            # Each feature's term of the logit, w_d * max_t h[t, d].
            term = w * top * mask.any(-1, keepdim=True)
            rows = self._trace_back(attn[-1], winners)  # [batch, width, time]
            scores = torch.einsum("bd,bdt->bt", term.abs(), rows) * mask
            signed = torch.einsum("bd,bdt->bt", term, rows) * mask
        return prob, scores / scores.sum(-1, keepdim=True).clamp_min(1e-12), signed

    def _trace_back(self, weights: Tensor | None, winners: Tensor) -> Tensor:
        """For feature ``d`` won at query ``q_d``: the attention row over the tokens that made it.

        ``weights [batch, heads, T, T]``, ``winners [batch, width]`` -> ``[batch, width, T]``.
        Without an output projection feature ``d`` belongs to head ``d // head_dim``; otherwise
        (or in residual blocks) the heads are averaged. Residual blocks also keep the token's
        own vector, so half of the credit stays with the winning position itself.
        """
        batch, width = winners.shape
        b_idx = torch.arange(batch, device=winners.device)[:, None]
        cfg = self.config
        if cfg.block == "plain" and not cfg.attn_out_proj:
            h_idx = torch.arange(width, device=winners.device)[None, :] // cfg.head_dim
            rows = weights[b_idx, h_idx, winners]  # [batch, width, T]
        else:
            rows = weights.mean(1)[b_idx, winners]
        if cfg.block == "transformer":
            own = torch.nn.functional.one_hot(winners, weights.shape[-1]).to(rows.dtype)
            rows = 0.5 * rows + 0.5 * own
        return rows


# The cost of a length group in the model's work per token (the projections): ``rows * keep *
# (1 + keep * GROUP_PAIR_COST) + GROUP_COST``, for ``rows`` reviews cut to ``keep`` slots. The
# attention's per-pair work is ~1/100 of a token's, and a group's fixed cost (its ~100 small
# operator calls, forward and backward) is worth ~500 tokens: of 0, 200, 500, 1500 and no
# split, 500 trained the 2018 model fastest at uniform lengths (docs/results.md, issue #31).
GROUP_PAIR_COST = 0.01
GROUP_COST = 500.0


def plan_length_groups(sorted_lengths: list[int], *, max_groups: int = 6,
                       min_rows: int = 8) -> list[int]:
    """Sizes of the length groups that encode a batch cheapest (see `GROUP_COST`).

    Args:
        sorted_lengths: the batch's lengths in ascending order.
        max_groups: at most this many groups.
        min_rows: every group but a batch smaller than this has at least ``min_rows`` rows;
            groups start at multiples of ``min_rows`` (which keeps the search tiny).

    Returns:
        Group sizes in order (summing to ``len(sorted_lengths)``); each group is cut to its
        last (longest) length. E.g. IMDB at maxlen 100, where 88% of the reviews fill every
        slot, gives one group of the full ones and one or two of the shorter.
    """
    n = len(sorted_lengths)
    if n == 0:
        return []
    if sorted_lengths[0] == sorted_lengths[-1]:
        return [n]  # equal lengths: splitting only adds groups' fixed costs (most IMDB batches)
    cuts = list(range(0, n - min_rows + 1, min_rows)) if n >= 2 * min_rows else [0]
    cuts = cuts + [n] if cuts[-1] != n else cuts
    if n - cuts[-2] < min_rows and len(cuts) > 2:
        del cuts[-2]  # the last group takes the remainder

    def cost(i: int, j: int) -> float:
        keep = max(sorted_lengths[cuts[j] - 1], 1)
        return (cuts[j] - cuts[i]) * keep * (1.0 + keep * GROUP_PAIR_COST) + GROUP_COST

    m = len(cuts) - 1
    # best[g][j]: cheapest cover of the first cuts[j] rows by g groups; back pointers in prev.
    inf = float("inf")
    best = [[inf] * (m + 1) for _ in range(max_groups + 1)]
    prev = [[0] * (m + 1) for _ in range(max_groups + 1)]
    best[0][0] = 0.0
    for g in range(1, max_groups + 1):
        for j in range(1, m + 1):
            for i in range(j):
                c = best[g - 1][i] + cost(i, j)
                if c < best[g][j]:
                    best[g][j], prev[g][j] = c, i
    groups = min(range(1, max_groups + 1), key=lambda g: best[g][m])
    sizes, j = [], m
    for g in range(groups, 0, -1):
        i = prev[g][j]
        sizes.append(cuts[j] - cuts[i])
        j = i
    return sizes[::-1]


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (what Keras' ``model.summary()`` calls 'Trainable params')."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
