"""Self-attention review classifier: the 2018 Keras model (preset ``keras2018``) and a stronger one.

``keras2018``: ``Embedding(30000, 128)`` + sinusoidal positions -> 8-head self-attention (no
bias, no output projection) -> global max pooling -> ``Dropout(0.5)`` -> ``Linear(128, 1)``:
3,889,281 parameters, as Keras reports. ``model(ids [batch, time], lengths [batch])`` ->
logits ``[batch]``. Padding, the CPU speed path: docs/concepts.md, "Sentiment"; explanations:
`attnkit.explain.sentiment`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.masking import lengths_to_mask, masked_softmax
from attnkit.attention.multi_head import MultiHeadAttention
from attnkit.attention.pooling import max_pool_projected
from attnkit.data.batching import plan_length_groups
from attnkit.models.config import JsonConfig, check_choices
from attnkit.positional import SinusoidalPositionalEncoding

# `logits_by_length` gathers the 2018 model's projections from `projection_tables` from this
# many tokens per vocabulary word in a call: below it, projecting the whole vocabulary costs
# more than it saves (docs/results.md).
TABLE_TOKENS_PER_WORD = 4


@dataclass
class SentimentConfig(JsonConfig):
    """Everything that defines a `SentimentClassifier` (saved as JSON in the run).

    Args:
        block: ``"plain"`` (the 2018 layer: attention output replaces the input) or
            ``"transformer"`` (pre-LN residual attention + feed-forward; ``num_heads * head_dim
            == embed_dim``).
        positional, pooling: ``"sinusoidal"`` (cos_sin, summed), ``"learned"`` or ``"none"``;
            ``"max"`` over time or ``"attention"`` (learned softmax pooling).
        dropout / block_dropout: before the classifier / inside blocks and on the embeddings.
        bigram_buckets: if > 0, hashed (previous, current) token-pair embeddings are added.
        mask_padding: exclude padding (``padding``: "pre" or "post") from attention, pooling
            and positions.
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

    def check(self) -> None:
        check_choices(self, block=("plain", "transformer"), positional=("sinusoidal", "learned",
                      "none"), pooling=("max", "attention"), padding=("pre", "post"))
        if self.block == "transformer" and self.num_heads * self.head_dim != self.embed_dim:
            raise ValueError(f"transformer blocks need num_heads * head_dim == embed_dim, got "
                             f"{self.num_heads} * {self.head_dim} != {self.embed_dim}")
        if not self.attn_out_proj and self.num_heads * self.head_dim != self.embed_dim \
                and self.num_layers > 1:
            raise ValueError("without an output projection, stacked layers need "
                             "num_heads * head_dim == embed_dim")


class _EmbeddingLookup(torch.autograd.Function):
    """``weight[ids]`` whose backward builds the dense ``[vocab, dim]`` gradient as zeros plus
    one ``index_add_``, faster than ``embedding_dense_backward``, which scans every id once per
    thread (docs/results.md)."""

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
    """Binary review classifier: ``forward(ids [batch, time], lengths [batch]) -> logits [batch]``
    (P(positive) is ``sigmoid(logits)``)."""

    # Length groups of a CPU batch in masked mode (`_pool_by_length`): at most this many, of at
    # least this many rows. On a GPU a batch is one group (small kernels are launch-bound there).
    length_groups = 6
    min_group_rows = 8

    def __init__(self, config: SentimentConfig):
        super().__init__()
        config.check()
        self.config = cfg = config
        d = cfg.embed_dim
        self.embedding = nn.Embedding(cfg.vocab_size, d)
        self.bigram = nn.Embedding(cfg.bigram_buckets, d) if cfg.bigram_buckets > 0 else None
        self.sinusoid = SinusoidalPositionalEncoding(d, mode="sum", layout="cos_sin") \
            if cfg.positional == "sinusoidal" else None
        # The sinusoid table, computed once and grown on demand for longer inputs; not
        # persistent, so checkpoints do not hold it.
        table = self.sinusoid.encoding(cfg.maxlen) if self.sinusoid is not None else None
        self.register_buffer("pos_table", table, persistent=False)
        self.learned_pos = nn.Embedding(cfg.maxlen, d) if cfg.positional == "learned" else None
        if self.learned_pos is not None:
            nn.init.normal_(self.learned_pos.weight, std=0.02)
        self.embed_drop = nn.Dropout(cfg.block_dropout)
        inner = d if cfg.attn_out_proj else cfg.num_heads * cfg.head_dim  # a plain layer's output
        if cfg.block == "plain":
            self.layers = nn.ModuleList(MultiHeadAttention(
                d if i == 0 else inner, num_heads=cfg.num_heads, head_dim=cfg.head_dim,
                bias=cfg.attn_bias, out_proj=cfg.attn_out_proj) for i in range(cfg.num_layers))
        else:
            self.layers = nn.ModuleList(_TransformerBlock(cfg) for _ in range(cfg.num_layers))
        width = inner if cfg.block == "plain" and cfg.num_layers else d
        self.final_norm = nn.LayerNorm(d) if cfg.block == "transformer" else None
        self.pool_score = nn.Linear(width, 1) if cfg.pooling == "attention" else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.classifier = nn.Linear(width, 1)
        # Keras' defaults, which the 2018 numbers were trained from: embeddings
        # uniform(-0.05, 0.05) (torch's N(0, 1) would swamp the unit-size sinusoids), the
        # classifier Glorot-uniform with zero bias (the attention layer does this itself).
        for emb in (self.embedding, self.bigram):
            if emb is not None:
                nn.init.uniform_(emb.weight, -0.05, 0.05)
        nn.init.xavier_uniform_(self.classifier.weight)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        if self.config.mask_padding and ids.numel():
            pooled = self._pool_by_length(ids, lengths)
        elif self._fused_pool() and ids.numel():
            pooled = self.encode(ids, lengths, pooled=True)[0]
        else:
            x, mask, _ = self.encode(ids, lengths)
            pooled, _ = self.pool(x, mask)
        return self._head(pooled)

    def _head(self, pooled: Tensor) -> Tensor:
        """Pooled ``[batch, width]`` -> logits ``[batch]`` (dropout, then the classifier)."""
        return self.classifier(self.dropout(pooled)).squeeze(-1)

    # ------------------------------------------------------------------ the network
    def real_mask(self, lengths: Tensor, time: int) -> Tensor:
        """``[batch, time]`` bool, True at real tokens (the last ``length`` slots for "pre")."""
        mask = lengths_to_mask(lengths, time, name="lengths")
        return mask.flip(-1) if self.config.padding == "pre" else mask

    @staticmethod
    def _positions(mask: Tensor) -> Tensor:
        """``[batch, time]`` positions from the first real token (masked mode)."""
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

    def encode(self, ids: Tensor, lengths: Tensor, need_weights: bool = False,
               tokens: Tensor | None = None, pooled: bool = False, full: bool = False):
        """-> ``(x [batch, time, width], mask [batch, time], weights)`` (a list, one per layer).

        ``tokens``: the looked-up vectors, when the caller has them. ``pooled`` (only where
        `_fused_pool` holds): ``x`` is already the max-pooled ``[batch, width]``. ``full``: the
        caller knows every row is ``time`` long, so no mask is built, applied or checked (the
        mask returned is then None with ``pooled``).
        """
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

    def pool(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """``x [batch, time, width]`` -> pooled ``[batch, width]`` and, by pooling, the
        attention-pooling weights ``[batch, time]`` or the winning position of each feature
        ``[batch, width]``."""
        pool_mask = mask if self.config.mask_padding else torch.ones_like(mask)
        if self.pool_score is not None:
            w = masked_softmax(self.pool_score(x).squeeze(-1), pool_mask)
            return torch.einsum("bt,btd->bd", w, x), w
        filled = x.masked_fill(~pool_mask.unsqueeze(-1), torch.finfo(x.dtype).min)
        pooled, winners = filled.max(dim=1)  # [batch, width], argmax over time per feature
        # An empty review has no real token: pool to zeros rather than finfo.min.
        pooled = pooled * pool_mask.any(-1, keepdim=True)
        return pooled, winners

    def token_vectors(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The looked-up vectors of the tokens (with their hashed bigrams), ``[batch, time,
        dim]``: what gradient attributions explain the logit by."""
        self._check_shapes(ids, lengths)
        return self._lookup(ids, self._bigram_ids(ids, self.real_mask(lengths, ids.shape[1])))

    def logits_from_vectors(self, vectors: Tensor, ids: Tensor, lengths: Tensor) -> Tensor:
        """``forward`` with the token vectors given (`token_vectors`, or a baseline such as
        zeros): ``[batch]`` logits, differentiable with respect to ``vectors``."""
        x, mask, _ = self.encode(ids, lengths, tokens=vectors)
        return self._head(self.pool(x, mask)[0])

    # ------------------------------------------------------------------ the CPU speed path
    def _pool_by_length(self, ids: Tensor, lengths: Tensor,
                        sorted_lengths: list[int] | None = None,
                        tables: tuple[Tensor, Tensor | None] | None = None) -> Tensor:
        """Masked mode: ``ids [batch, time]`` -> pooled ``[batch, width]`` in input order,
        rows encoded in length groups (`plan_length_groups`) each cut to its longest row
        (docs/concepts.md, "Sentiment"). ``sorted_lengths``: validated, ascending lengths
        (`logits_by_length`: the batch is then not sorted here); ``tables``:
        `projection_tables` (inference)."""
        if sorted_lengths is None:
            self._check_shapes(ids, lengths)
        batch, time = ids.shape
        # The mask validates the lengths before they pick columns.
        bigram_ids = self._bigram_ids(ids, self.real_mask(lengths, time))
        order = None
        if sorted_lengths is None and ids.device.type == "cpu":  # (a GPU would wait for it)
            order = torch.argsort(lengths, stable=True)
            sorted_lengths = lengths[order].tolist()
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
        # [vocab, dim] embedding gradient per group.
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
            x, sub_mask, _ = self.encode(sub_ids, sub_len, pooled=fused, full=full,
                                         tokens=tokens.view(*sub_ids.shape, -1))
            parts.append(x if fused else self.pool(x, sub_mask)[0])
        return parts

    @torch.no_grad()
    def logits_by_length(self, ids: Tensor, lengths: Tensor, *, batch_size: int = 256
                         ) -> Tensor:
        """Logits ``[n]`` of many reviews ``ids [n, time]`` in input order, without weights:
        ``batch_size`` at a time in length order, each batch cut to its longest review (equal to
        ``forward`` to float32 rounding), from `projection_tables` past `TABLE_TOKENS_PER_WORD`
        tokens per vocabulary word. Runs in the model's current mode."""
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
                logits = self._head(self._pool_by_length(sub_ids, sub_len, part, tables))
            elif tables is not None and sub_ids.numel():
                logits = self._head(self._pool_projected(sub_ids, sub_len, True, tables))
            else:
                logits = self(sub_ids, sub_len)
            out[rows] = logits.to(out.dtype)
        return out

    def predict_proba(self, ids: Tensor, lengths: Tensor, *, batch_size: int = 256) -> Tensor:
        """P(positive) ``[n]`` of many reviews (`logits_by_length`, then a sigmoid)."""
        return torch.sigmoid(self.logits_by_length(ids, lengths, batch_size=batch_size))

    def projection_tables(self, time: int, device: torch.device | None = None
                          ) -> tuple[Tensor, Tensor | None] | None:
        """The 2018 model's Q/K/V projection of every word and position, ``(words
        [vocab_size, 3 * inner], positions [>= time, 3 * inner] or None)``: the projection is
        linear, ``(e + p) W^T + b = (e W^T + b) + p W^T``, so two gathered rows replace the
        matmul. None where that does not hold (several or residual layers, attention pooling,
        an output projection, bigrams, embedding dropout in training, autocast)."""
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
        gradient): as `encode` with ``pooled``, each token's projection gathered. ``full``:
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


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (what Keras' ``model.summary()`` calls 'Trainable params')."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
