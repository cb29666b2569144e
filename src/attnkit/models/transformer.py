"""A pre-norm Transformer encoder-decoder (Vaswani et al. 2017) from attnkit parts.

Attention is `attnkit.attention.multi_head.MultiHeadAttention`, positions come from
`attnkit.positional`. ``forward`` trains on the whole target at once; decoding uses the step
API (`attnkit.models.step`), incremental by default (docs/concepts.md, "Incremental decoding").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.kv_cache import KeyValueCache, SourceKeyValues
from attnkit.attention.multi_head import MultiHeadAttention
from attnkit.models.config import TransformerConfig
from attnkit.models.step import StepOutput, Weights, check_targets, check_tokens, check_weights
from attnkit.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


def _feed_forward(d: int, ff: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff, d))


class EncoderLayer(nn.Module):
    """``x + SelfAttn(LN(x))`` then ``x + FF(LN(x))``; padded keys masked. ``[batch, S, d]``."""

    def __init__(self, d: int, heads: int, ff: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.ff = _feed_forward(d, ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, lengths: Tensor, need_weights: bool = False):
        """``x [batch, S, d]`` -> the layer's output and its self-attention ``[batch, heads, S,
        S]`` (None without ``need_weights``)."""
        h = self.norm1(x)
        out = self.attn(h, h, key_lengths=lengths, need_weights=need_weights)
        x = x + self.drop(out.context)
        return x + self.drop(self.ff(self.norm2(x))), out.weights


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the source, feed-forward; all pre-norm.

    ``layer(y [batch, T, d], memory [batch, S, d], src_lengths [batch], need_weights=False)`` ->
    ``(y, cross weights [batch, heads, T, S] or None)``; `step` is the incremental form.
    """

    def __init__(self, d: int, heads: int, ff: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.ff = _feed_forward(d, ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, y: Tensor, memory: Tensor, src_lengths: Tensor,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        h = self.norm1(y)
        y = y + self.drop(self.self_attn(h, h, causal=True).context)
        cross = self.cross_attn(self.norm2(y), memory, key_lengths=src_lengths,
                                need_weights=need_weights)
        y = y + self.drop(cross.context)
        return y + self.drop(self.ff(self.norm3(y))), cross.weights

    def step(self, y: Tensor, cache: KeyValueCache, source: SourceKeyValues,
             need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """New positions ``y [rows, t, d]`` -> ``(y, cross weights [rows, heads, t, S] or
        None)``; their self-attention keys/values are appended to ``cache``. Inference only
        (no dropout)."""
        y = y + self.self_attn.attend_cached(self.norm1(y), cache).context
        cross = self.cross_attn.attend_source(self.norm2(y), source, need_weights=need_weights)
        y = y + cross.context
        return y + self.ff(self.norm3(y)), cross.weights


@dataclass
class TransformerState:
    """The decoding state of `TransformerSeq2Seq` (rows: ``beams`` per sentence): the encoder
    output ``source [sentences, S, d]``; ``positions [P, d]``, grown past ``P``; ``length``
    positions fed; per decoder layer the `KeyValueCache` of every row and the `SourceKeyValues`
    of every sentence (``caches``, ``sources``), or, on the reference path (``use_cache=False``),
    the ids fed (``prefix [rows, length]``); ``encoder_weights [sentences, layers, heads, S,
    S]`` with ``weights="all"``."""

    source: Tensor
    src_lengths: Tensor
    positions: Tensor
    length: int = 0
    caches: tuple[KeyValueCache, ...] | None = None
    sources: tuple[SourceKeyValues, ...] | None = None
    prefix: Tensor | None = None
    encoder_weights: Tensor | None = None


class TransformerSeq2Seq(nn.Module):
    """The Transformer translation model, built from a `TransformerConfig`.

    ``model(src [batch, S], src_lengths [batch], tgt_in [batch, T], need_weights=False)`` ->
    ``logits [batch, T, tgt_vocab]`` (and per decoder layer the cross-attention ``[batch, heads,
    T, S]``). Decoding: the step API (`encode`, `step`, `reorder`).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        d = c.d_model
        self.tgt_embedding = nn.Embedding(c.tgt_vocab, d, padding_idx=c.pad_id)
        # A joint subword vocabulary lets both languages share one table (fewer parameters,
        # and names/numbers copied from the source already have the right target embedding).
        self.src_embedding = (self.tgt_embedding if c.share_embeddings
                              else nn.Embedding(c.src_vocab, d, padding_idx=c.pad_id))
        for emb in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(emb.weight, std=d ** -0.5)  # with the sqrt(d) scale: unit variance
            with torch.no_grad():
                emb.weight[c.pad_id].zero_()
        self.positions = LearnedPositionalEmbedding(c.max_len, d) if c.positional == "learned" \
            else SinusoidalPositionalEncoding(d)
        self.drop = nn.Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d, c.heads, c.ff_dim, c.dropout) for _ in range(c.layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d, c.heads, c.ff_dim, c.dropout) for _ in range(c.layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.out = nn.Linear(d, c.tgt_vocab, bias=False)
        if c.tie_embeddings:
            self.out.weight = self.tgt_embedding.weight

    def _embed(self, vectors: Tensor) -> Tensor:
        return self.drop(self.positions(vectors * math.sqrt(self.config.d_model), 0))

    @property
    def source_embedding(self) -> nn.Embedding:
        """The table the source tokens are looked up in (the target's with shared embeddings)."""
        return self.src_embedding

    def _encoder(self, src: Tensor, src_lengths: Tensor, embedded: Tensor | None,
                 keep_weights: bool) -> tuple[Tensor, Tensor | None]:
        """``src [batch, S]`` -> (normalised encoder output ``[batch, S, d]``, the layers'
        self-attention ``[batch, layers, heads, S, S]`` when ``keep_weights``)."""
        check_tokens(src, src_lengths)
        x = self._embed(self.src_embedding(src) if embedded is None else embedded)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x, src_lengths, need_weights=keep_weights)
            weights.append(w)
        return self.encoder_norm(x), torch.stack(weights, 1) if keep_weights else None

    def encode(self, src: Tensor, src_lengths: Tensor, *, beams: int = 1,
               use_cache: bool = True, weights: Weights = "none",
               embedded: Tensor | None = None) -> TransformerState:
        """Encode ``src [sentences, S]`` for decoding (the step API): a `TransformerState`.

        ``embedded [sentences, S, d]`` replaces the looked-up source vectors (attributions take
        gradients with respect to them); ``weights="all"`` keeps the encoder's self-attention.
        """
        check_weights(weights)
        src_lengths = src_lengths.to(src.device)
        source, enc_weights = self._encoder(src, src_lengths, embedded, weights == "all")
        # Room for a typical output: the caches and the table double when a sentence is longer.
        capacity, rows = 2 * src.shape[1] + 8, src.shape[0] * beams
        state = TransformerState(source, src_lengths, self._position_table(capacity, source),
                                 encoder_weights=enc_weights)
        if use_cache:
            state.caches = tuple(layer.self_attn.start_cache(rows, capacity, source)
                                 for layer in self.decoder_layers)
            state.sources = tuple(layer.cross_attn.source_keys_values(source, src_lengths)
                                  for layer in self.decoder_layers)
        else:
            state.prefix = src.new_empty(rows, 0)
        return state

    def _position_table(self, length: int, like: Tensor) -> Tensor:
        if isinstance(self.positions, LearnedPositionalEmbedding):
            length = min(length, self.config.max_len)
        return self.positions.encoding(length, device=like.device, dtype=like.dtype)

    def _grown_positions(self, state: TransformerState, end: int) -> Tensor:
        """``state.positions``, grown (doubled) to hold ``end`` positions; ValueError naming
        ``max_len`` for learned positions past it."""
        if end > state.positions.shape[0]:
            state.positions = self._position_table(max(end, 2 * state.positions.shape[0]),
                                                   state.source)
            self.positions.encoding(1, end - 1)  # learned positions past max_len raise here
        return state.positions

    def step(self, tokens: Tensor, state: TransformerState, *, weights: Weights = "none",
             logits: bool = True) -> StepOutput:
        """Feed ``tokens [rows, t]`` (the step API): a `StepOutput` with each layer's output
        ``[rows, t, d]``; the caches are written in place.
        """
        check_weights(weights)
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [rows, t] ids, got {tuple(tokens.shape)}")
        n = len(self.decoder_layers)
        wants = [weights == "all" or (weights == "last" and i == n - 1) for i in range(n)]
        if state.caches is None:
            hidden, cross = self._reference_step(tokens, state, wants)
        else:
            hidden, cross = self._cached_step(tokens, state, wants)
        # The output layer over the new positions only: over a subword vocabulary it costs as
        # much as the decoder itself.
        scores = self.out(self.decoder_norm(hidden[-1])) if logits else None
        if weights == "all":    # [rows, t, layers, heads, S]
            maps = torch.stack(cross, dim=1).permute(0, 3, 1, 2, 4)
        else:                   # the last layer's head mean [rows, t, S], or None
            maps = cross[-1].mean(dim=1) if weights == "last" else None
        return StepOutput(scores, state, maps, hidden)

    def _cached_step(self, tokens: Tensor, state: TransformerState, wants: list[bool]
                     ) -> tuple[list[Tensor], list[Tensor | None]]:
        start, t = state.length, tokens.shape[1]
        y = self.tgt_embedding(tokens) * math.sqrt(self.config.d_model)
        y = y + self._grown_positions(state, start + t)[start:start + t]
        hidden, cross = [], []
        for layer, cache, source, want in zip(self.decoder_layers, state.caches, state.sources,
                                              wants, strict=True):
            y, w = layer.step(y, cache, source, want)
            hidden.append(y)
            cross.append(w)
        state.length = start + t
        return hidden, cross

    def _reference_step(self, tokens: Tensor, state: TransformerState, wants: list[bool]
                        ) -> tuple[list[Tensor], list[Tensor | None]]:
        """The whole prefix through every layer (the uncached reference): the last ``t``
        positions' outputs and cross weights."""
        state.prefix = torch.cat([state.prefix, tokens], dim=1)
        t, per = tokens.shape[1], tokens.shape[0] // state.source.shape[0]
        hidden, cross = self._decoder(state.prefix, state.source.repeat_interleave(per, dim=0),
                                      state.src_lengths.repeat_interleave(per, dim=0), wants)
        state.length += t
        return [h[:, -t:] for h in hidden], [None if w is None else w[:, :, -t:] for w in cross]

    def reorder(self, state: TransformerState, rows: Tensor,
                sentences: Tensor | None = None) -> TransformerState:
        """Keep rows ``rows`` (and, when some finished, the sentences ``sentences``)."""
        for cache in state.caches or ():
            cache.reorder(rows)
        out = dataclasses.replace(
            state, prefix=None if state.prefix is None else state.prefix.index_select(0, rows))
        if sentences is not None:
            out.source = state.source.index_select(0, sentences)
            out.src_lengths = state.src_lengths.index_select(0, sentences)
            if state.sources is not None:
                out.sources = tuple(s.select(sentences) for s in state.sources)
            if state.encoder_weights is not None:
                out.encoder_weights = state.encoder_weights.index_select(0, sentences)
        return out

    def _decoder(self, tgt_in: Tensor, memory: Tensor, src_lengths: Tensor, wants: list[bool]
                 ) -> tuple[list[Tensor], list[Tensor | None]]:
        """Teacher-forced decoder layers over ``memory [rows, S, d]``: per layer its output
        ``[rows, T, d]`` and cross weights ``[rows, heads, T, S]`` (where ``wants``, else None)."""
        y = self._embed(self.tgt_embedding(tgt_in))
        hidden, cross = [], []
        for layer, want in zip(self.decoder_layers, wants, strict=True):
            y, w = layer(y, memory, src_lengths, need_weights=want)
            hidden.append(y)
            cross.append(w)
        return hidden, cross

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                need_weights: bool = False, weights_of: int | None = None):
        """Teacher-forced logits ``[batch, T, tgt_vocab]``; with ``need_weights`` also every
        decoder layer's cross-attention ``[batch, heads, T, S]``, with ``weights_of`` (0-based)
        that layer's alone (the alignment loss reads it; the other layers keep the fused
        kernel)."""
        check_targets(src, tgt_in)
        src_lengths = src_lengths.to(src.device)
        memory, _ = self._encoder(src, src_lengths, None, keep_weights=False)
        hidden, weights = self._decoder(tgt_in, memory, src_lengths,
                                        [need_weights or i == weights_of
                                         for i in range(len(self.decoder_layers))])
        logits = self.out(self.decoder_norm(hidden[-1]))
        if weights_of is not None:
            return logits, weights[weights_of]
        return (logits, weights) if need_weights else logits
