"""RNN encoder-decoder for translation: training forward + the step API decoders use.

Every translation model in attnkit (this one and `
TransformerSeq2Seq`) has the same surface, which is all `attnkit.decoding` relies on:

* ``forward(src [B, S], src_lengths [B], tgt_in [B, T]) -> logits [B, T, V]``
* ``encode(src, src_lengths, use_cache=True) -> state`` (``use_cache=False``: the uncached
  reference path, same outputs, for tests and benchmarks)
* ``decode_step(prev_tokens [B], state, need_weights=True) -> (log_probs [B, V], new_state,
  attn [B, S] or None)`` (None also when ``need_weights=False``: the caller does not want the
  attention, so a model may take a faster path)
* ``reorder_state(state, index [B'])`` -> the state of rows ``index`` (beam search)
* ``config`` with ``pad_id``, ``bos_id``, ``eos_id``, ``unk_id`` and ``to_dict()``.

Example:
    ```python
    cfg = RNNSeq2SeqConfig(src_vocab=100, tgt_vocab=120, attention="general", style="luong")
    model = RNNSeq2Seq(cfg)
    logits = model(src, src_lengths, tgt_in)          # [batch, T, 120]
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.attention.base import ScoreAttention
from attnkit.models.config import RNNSeq2SeqConfig
from attnkit.models.rnn_decoder import RNNDecoder, RNNDecoderState
from attnkit.models.rnn_encoder import RNNEncoder, check_teacher_input


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder with (or without) attention, built from an `RNNSeq2SeqConfig`.

    Args:
        config: the model configuration (JSON round-trip via ``to_dict``/``config_from_dict``).
        attention_module: optional custom `ScoreAttention` for the decoder (query size
            ``config.hidden``, key size the encoder output size).

    Call:
        ``model(src [batch, S], src_lengths [batch], tgt_in [batch, T], need_weights=False)``
        -> ``logits [batch, T, tgt_vocab]`` (and attention ``[batch, T, S]`` with
        ``need_weights=True``; None without attention). In training mode with
        ``teacher_forcing_ratio < 1`` each step feeds, per sentence, the gold token with that
        probability and the model's own greedy prediction otherwise.
    """

    def __init__(self, config: RNNSeq2SeqConfig, attention_module: ScoreAttention | None = None):
        super().__init__()
        self.config = config
        c = config
        self.encoder = RNNEncoder(c.src_vocab, c.emb_dim, c.hidden, c.layers, c.cell,
                                  c.bidirectional, c.dropout, dec_hidden=c.hidden,
                                  pad_id=c.pad_id)
        self.decoder = RNNDecoder(c.tgt_vocab, c.emb_dim, c.hidden, self.encoder.out_dim,
                                  c.layers, c.cell, c.style, c.attention, c.attention_units,
                                  c.window, c.dropout, c.pad_id, attention_module)

    @property
    def source_embedding(self) -> nn.Embedding:
        """The table the source tokens are looked up in."""
        return self.encoder.embedding

    def encode(self, src: Tensor, src_lengths: Tensor, use_cache: bool = True,
               embedded: Tensor | None = None) -> RNNDecoderState:
        """Run the encoder and precompute the attention memory: the decoder's initial state
        (``embedded``: the source token vectors to use instead of looking them up)."""
        enc_out, enc_state = self.encoder(src, src_lengths, embedded)
        return self.decoder.init_state(enc_out, src_lengths.to(enc_out.device), enc_state,
                                       use_cache=use_cache)

    def decode_step(self, prev_tokens: Tensor, state: RNNDecoderState,
                    need_weights: bool = True
                    ) -> tuple[Tensor, RNNDecoderState, Tensor | None]:
        """One decoder step: ``prev_tokens [batch]`` -> log-probabilities ``[batch, vocab]``."""
        logits, state, weights = self.decoder.step(prev_tokens, state, need_weights)
        return torch.log_softmax(logits.float(), dim=-1), state, weights

    def reorder_state(self, state: RNNDecoderState, index: Tensor) -> RNNDecoderState:
        return state.reorder(index)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                need_weights: bool = False):
        check_teacher_input(src, tgt_in)
        state = self.encode(src, src_lengths)
        ratio = self.config.teacher_forcing_ratio
        sample = self.training and ratio < 1.0
        logits_steps: list[Tensor] = []
        weight_steps: list[Tensor] = []
        prev = tgt_in[:, 0]
        for t in range(tgt_in.shape[1]):
            if t > 0:
                prev = tgt_in[:, t]
                if sample:
                    own = logits_steps[-1].argmax(-1)
                    gold = torch.rand(prev.shape, device=prev.device) < ratio
                    prev = torch.where(gold, prev, own)
            logits, state, weights = self.decoder.step(prev, state)
            logits_steps.append(logits)
            if need_weights and weights is not None:
                weight_steps.append(weights)
        logits = torch.stack(logits_steps, dim=1)
        if not need_weights:
            return logits
        return logits, (torch.stack(weight_steps, dim=1) if weight_steps else None)
