"""A Transformer's decoding as two graphs compiled ahead of time (`attnkit.compiler`): the
encoder, with every decoder layer's cross-attention keys and values, and the incremental step;
behind the step API (`attnkit.models.step`), so greedy and beam search run it as they run the
model itself. No attention weights are computed: the weights path is the eager model's. How one
step serves every size, and an example: docs/concepts.md ("Compiled decoding")."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.export import Dim

from attnkit.models.step import StepOutput, Weights, check_tokens
from attnkit.models.transformer import TransformerSeq2Seq

GRAPHS = ("encoder", "step")


@dataclass
class GraphState:
    """The decoding state of `CompiledTransformer`: the encoder output ``source [sentences, S,
    d]``; cross-attention ``src_keys``, ``src_values`` ``[layers, sentences, heads, S,
    head_dim]`` and ``src_bias [sentences, 1, 1, S]`` (0, or the lowest value at padding); the
    self-attention cache ``[capacity, layers, sentences, beams, heads, head_dim]``, its first
    ``length`` positions written; the position table ``[P, d]``."""

    source: Tensor
    src_lengths: Tensor
    src_keys: Tensor
    src_values: Tensor
    src_bias: Tensor
    self_keys: Tensor
    self_values: Tensor
    positions: Tensor
    length: int = 0
    encoder_weights: Tensor | None = None


class _Graph(nn.Module):
    def __init__(self, model: TransformerSeq2Seq):
        super().__init__()
        self.model = model


class EncoderGraph(_Graph):
    """``src [N, S], src_lengths [N]`` -> (encoder output ``[N, S, d]``, cross keys and values
    ``[L, N, H, S, hd]``, score bias ``[N, 1, 1, S]``): `TransformerSeq2Seq.encode`'s
    arithmetic, without its checks or branches on values."""

    def forward(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        m = self.model
        n, length = src.shape
        real = (torch.arange(length, device=src.device) < src_lengths[:, None])[:, None, None]
        x = m.positions(m.src_embedding(src) * math.sqrt(m.config.d_model), 0)
        for layer in m.encoder_layers:
            attn = layer.attn
            q, k, v = _heads(F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias),
                             3, attn.num_heads)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=real)
            x = x + attn.out_proj(ctx.transpose(1, 2).reshape(n, length, attn.inner_dim))
            x = x + layer.ff(layer.norm2(x))
        source = m.encoder_norm(x)
        keys, values = [], []
        for layer in m.decoder_layers:
            cross = layer.cross_attn
            k, v = _heads(F.linear(source, cross.in_proj_weight[cross.inner_dim:],
                                   cross.in_proj_bias[cross.inner_dim:]), 2, cross.num_heads)
            keys.append(k)
            values.append(v)
        bias = torch.zeros(real.shape, dtype=source.dtype, device=src.device).masked_fill(
            ~real, torch.finfo(source.dtype).min)
        return source, torch.stack(keys), torch.stack(values), bias


class StepGraph(_Graph):
    """One decoder step: ``tokens [N, g]`` at ``position [1]`` over the cache ``[T, L, N, g, H,
    hd]`` (positions ``< position`` attended) and the source -> (logits ``[N, g, V]``, new keys
    and values ``[L, N, g, H, hd]``); as `attnkit.models.transformer.DecoderLayer.step`.
    """

    def forward(self, tokens: Tensor, position: Tensor, self_keys: Tensor, self_values: Tensor,
                src_keys: Tensor, src_values: Tensor, src_bias: Tensor, positions: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        m = self.model
        n, g = tokens.shape
        past_len = self_keys.shape[0]
        y = (m.tgt_embedding(tokens) * math.sqrt(m.config.d_model)
             + positions.index_select(0, position))                           # [N, g, d]
        written = torch.zeros(past_len, dtype=y.dtype, device=y.device).masked_fill(
            torch.arange(past_len, device=y.device) >= position, torch.finfo(y.dtype).min)
        new_keys, new_values = [], []
        for i, layer in enumerate(m.decoder_layers):
            sa, ca = layer.self_attn, layer.cross_attn
            h, hd = sa.num_heads, sa.head_dim
            scale = 1.0 / math.sqrt(hd)
            q, k, v = F.linear(layer.norm1(y), sa.in_proj_weight, sa.in_proj_bias).view(
                n, g, 3, h, hd).unbind(2)                                      # [N, g, H, hd]
            new_keys.append(k)
            new_values.append(v)
            past = torch.einsum("nghd,tnghd->nght", q, self_keys[:, i]) * scale + written
            p = torch.softmax(torch.cat([past, (q * k).sum(-1, keepdim=True) * scale], -1), -1)
            ctx = (torch.einsum("nght,tnghd->nghd", p[..., :past_len], self_values[:, i])
                   + p[..., past_len:] * v)
            y = y + sa.out_proj(ctx.reshape(n, g, h * hd))
            q = F.linear(layer.norm2(y), ca.in_proj_weight[:ca.inner_dim],
                         ca.in_proj_bias[:ca.inner_dim]).view(n, g, h, hd)
            scores = torch.einsum("nghd,nhsd->nghs", q, src_keys[i]) * scale + src_bias
            ctx = torch.einsum("nghs,nhsd->nghd", torch.softmax(scores, -1), src_values[i])
            y = y + ca.out_proj(ctx.reshape(n, g, h * hd))
            y = y + layer.ff(layer.norm3(y))
        return m.out(m.decoder_norm(y)), torch.stack(new_keys), torch.stack(new_values)


def _heads(x: Tensor, n: int, heads: int) -> tuple[Tensor, ...]:
    """``[batch, T, n * inner]`` -> n tensors ``[batch, heads, T, head_dim]``."""
    b, t = x.shape[:2]
    return x.view(b, t, n, heads, -1).permute(2, 0, 3, 1, 4).unbind(0)


def graph_specs(model: TransformerSeq2Seq) -> dict[str, tuple[nn.Module, tuple, Any]]:
    """The two graphs to compile (`attnkit.compiler.Packages.build`): each module, example
    arguments and the sizes left free (sentences, beams, source length, capacity, table)."""
    sentences, beams = Dim("sentences", min=1, max=1 << 16), Dim("beams", min=1, max=1024)
    length, capacity = Dim("length", min=1, max=1 << 16), Dim("past", min=1, max=1 << 17)
    table = Dim("table", min=2, max=1 << 17)
    attn = model.decoder_layers[0].self_attn
    layers, h, hd = len(model.decoder_layers), attn.num_heads, attn.head_dim
    # Example sizes that no model size equals (export would take them for one size).
    n, g, s, c, t = 5, 7, 11, 29, 31
    p = next(model.parameters())
    src = torch.full((n, s), 4, dtype=torch.long, device=p.device)
    cache = p.new_zeros(c, layers, n, g, h, hd)
    source = p.new_zeros(layers, n, h, s, hd)
    # Distinct tensors: one passed twice would be one input to the exported graph.
    step_args = (src[:, :g].contiguous(), torch.tensor([1], device=p.device), cache,
                 cache.clone(), source, source.clone(), p.new_zeros(n, 1, 1, s),
                 p.new_zeros(t, model.config.d_model))
    cache_dims = {0: capacity, 2: sentences, 3: beams}
    source_dims = {1: sentences, 3: length}
    return {"encoder": (EncoderGraph(model), (src, torch.full((n,), s, device=p.device)),
                        ({0: sentences, 1: length}, {0: sentences})),
            "step": (StepGraph(model), step_args,
                     ({0: sentences, 1: beams}, None, cache_dims, cache_dims, source_dims,
                      source_dims, {0: sentences, 3: length}, {0: table}))}


class CompiledTransformer(nn.Module):
    """The step API of a `TransformerSeq2Seq` (eval mode) through ``graphs``, its ``{"encoder",
    "step"}`` callables (`attnkit.compiler.Packages`, or the graph modules themselves).
    """

    def __init__(self, model: TransformerSeq2Seq, graphs: Mapping[str, Callable[..., Any]]):
        super().__init__()
        self.model, self.config = model, model.config
        self._encode, self._step = graphs["encoder"], graphs["step"]

    def encode(self, src: Tensor, src_lengths: Tensor, *, beams: int = 1,
               use_cache: bool = True, weights: Weights = "none") -> GraphState:
        """The step API's ``encode``; ValueError for weights or bad ``src`` / ``src_lengths``."""
        if weights != "none":
            raise ValueError("the compiled decoder computes no attention weights; decode "
                             "with the model itself for them")
        src_lengths = src_lengths.to(src.device)
        check_tokens(src, src_lengths)
        source, keys, values, bias = self._encode(src.contiguous(), src_lengths.contiguous())
        # The step graph reads its inputs as contiguous; with one decoder layer the encoder
        # graph's stack is a view whose heads and positions are transposed in memory.
        keys, values = keys.contiguous(), values.contiguous()
        attn = self.model.decoder_layers[0].self_attn
        capacity = 2 * src.shape[1] + 8       # as the eager model's; doubled when full
        cache = source.new_empty(capacity, len(self.model.decoder_layers), src.shape[0], beams,
                                 attn.num_heads, attn.head_dim)
        cache[0] = 0.0    # the first step reads it, masked out: finite, never NaN
        positions = self.model._position_table(capacity, source)
        return GraphState(source, src_lengths, keys, values, bias, cache, cache.clone(),
                          positions)

    def step(self, tokens: Tensor, state: GraphState, *, weights: Weights = "none",
             logits: bool = True) -> StepOutput:
        """The step API's ``step`` for one new position a row (``tokens [rows, 1]``)."""
        if weights != "none" or tokens.dim() != 2 or tokens.shape[1] != 1:
            raise ValueError("the compiled decoder feeds one token a row and computes no "
                             f"weights, got tokens {tuple(tokens.shape)}, weights {weights!r}")
        t, (n, g) = state.length, state.self_keys.shape[2:4]
        if t >= state.self_keys.shape[0]:  # full: doubled, the written positions kept
            state.self_keys, state.self_values = (torch.cat([c, torch.zeros_like(c)])
                                                  for c in (state.self_keys, state.self_values))
        self.model._grown_positions(state, t + 1)
        past = max(t, 1)          # the first step: one position, masked out
        out, keys, values = self._step(tokens.reshape(n, g), tokens.new_tensor([t]),
                                       state.self_keys[:past], state.self_values[:past],
                                       state.src_keys, state.src_values, state.src_bias,
                                       state.positions)
        state.self_keys[t] = keys
        state.self_values[t] = values
        state.length = t + 1
        return StepOutput(out.reshape(n * g, 1, -1) if logits else None, state, None, None)

    def reorder(self, state: GraphState, rows: Tensor,
                sentences: Tensor | None = None) -> GraphState:
        """The step API's ``reorder``: keep rows ``rows`` (and the sentences ``sentences``)."""
        capacity, layers, _, g, *rest = state.self_keys.shape
        written = max(state.length, 1)   # what a step reads (`step`); the rest is rewritten

        def keep(cache: Tensor) -> Tensor:
            kept = cache.new_empty(capacity, layers, rows.shape[0] // g, g, *rest)
            flat = cache[:written].reshape(written, layers, -1, *rest)
            kept[:written] = flat.index_select(2, rows).view(written, layers, -1, g, *rest)
            return kept

        out = dataclasses.replace(state, self_keys=keep(state.self_keys),
                                  self_values=keep(state.self_values))
        if sentences is not None:
            out.source = state.source.index_select(0, sentences)
            out.src_lengths = state.src_lengths.index_select(0, sentences)
            out.src_keys = state.src_keys.index_select(1, sentences)
            out.src_values = state.src_values.index_select(1, sentences)
            out.src_bias = state.src_bias.index_select(0, sentences)
        return out
