"""The RNN encoder: embedding -> (bi)GRU/LSTM over packed sequences -> outputs + bridged state.

Packing over ``src_lengths`` means padding never enters the recurrence: a sentence's outputs and
final state are the same whether it is encoded alone or in a padded batch.

Example:
    ```python
    enc = RNNEncoder(vocab=100, emb_dim=32, hidden=64, layers=1, cell="gru",
                     bidirectional=True, dec_hidden=64)
    out, state = enc(src, src_lengths)   # out [batch, S, 128], state [1, batch, 64]
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

RNNState = Tensor | tuple[Tensor, Tensor]  # GRU: h; LSTM: (h, c), each [layers, batch, hidden]


def check_tokens(src: Tensor, src_lengths: Tensor) -> None:
    """Raise ValueError unless ``src [batch, S]`` ints and ``src_lengths [batch]`` in 1..S."""
    if src.dim() != 2 or src.dtype.is_floating_point:
        raise ValueError(f"src must be integer token ids [batch, S], got {tuple(src.shape)} "
                         f"{src.dtype}")
    if src_lengths.dim() != 1 or src_lengths.shape[0] != src.shape[0]:
        raise ValueError(f"src_lengths must have shape [{src.shape[0]}], "
                         f"got {tuple(src_lengths.shape)}")
    # Not while compiling: a read of values would cut the graph (`lengths_to_mask`).
    if src_lengths.numel() and not torch.compiler.is_compiling() and (
            int(src_lengths.min()) < 1 or int(src_lengths.max()) > src.shape[1]):
        raise ValueError(f"src_lengths must lie in 1..{src.shape[1]} (the padded source length), "
                         f"got {src_lengths.tolist()}")


def check_teacher_input(src: Tensor, tgt_in: Tensor) -> None:
    """Raise ValueError unless ``tgt_in`` is ``[batch, T]``, one target per source (what every
    encoder-decoder's teacher-forced forward takes)."""
    if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
        raise ValueError(f"tgt_in must have shape [{src.shape[0]}, T], "
                         f"got {tuple(tgt_in.shape)}")


class RNNEncoder(nn.Module):
    """Embedding + multi-layer (bi)directional GRU/LSTM.

    Args:
        vocab, emb_dim, hidden: source vocabulary, embedding and per-direction hidden sizes.
        layers, cell, bidirectional, dropout, pad_id: the RNN (``"gru"``/``"lstm"``).
        dec_hidden: the decoder's hidden size; the final state is bridged to it.

    ``encoder(src [batch, S], src_lengths [batch])`` -> ``(outputs [batch, S, hidden * dirs],
    state)``, padded outputs zero; ``state [layers, batch, dec_hidden]`` (``(h, c)`` for LSTM) is
    ``tanh(W [h_fwd; h_bwd])`` per layer.
    """

    def __init__(self, vocab: int, emb_dim: int, hidden: int, layers: int = 1, cell: str = "gru",
                 bidirectional: bool = True, dropout: float = 0.0, dec_hidden: int | None = None,
                 pad_id: int = 0):
        super().__init__()
        self.cell = cell
        self.layers = layers
        self.directions = 2 if bidirectional else 1
        self.out_dim = hidden * self.directions
        dec_hidden = hidden if dec_hidden is None else dec_hidden
        self.embedding = nn.Embedding(vocab, emb_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(emb_dim, hidden, num_layers=layers, batch_first=True,
                           bidirectional=bidirectional, dropout=dropout if layers > 1 else 0.0)
        self.bridge_h = nn.Linear(self.out_dim, dec_hidden)
        self.bridge_c = nn.Linear(self.out_dim, dec_hidden) if cell == "lstm" else None

    def _merge_directions(self, h: Tensor) -> Tensor:
        # [layers * dirs, batch, hidden] -> [layers, batch, dirs * hidden]
        batch = h.shape[1]
        h = h.view(self.layers, self.directions, batch, -1)
        return torch.cat([h[:, d] for d in range(self.directions)], dim=-1)

    def forward(self, src: Tensor, src_lengths: Tensor,
                embedded: Tensor | None = None) -> tuple[Tensor, RNNState]:
        """``src [batch, S]`` -> (outputs ``[batch, S, out_dim]``, the decoder's initial state);
        ``embedded [batch, S, emb_dim]``: the looked-up token vectors to use instead of
        ``self.embedding(src)`` (attributions take gradients with respect to them)."""
        check_tokens(src, src_lengths)
        emb = self.dropout(self.embedding(src) if embedded is None else embedded)
        packed = pack_padded_sequence(emb, src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, final = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        if self.cell == "lstm":
            h, c = final
            state: RNNState = (torch.tanh(self.bridge_h(self._merge_directions(h))),
                               self.bridge_c(self._merge_directions(c)))
        else:
            state = torch.tanh(self.bridge_h(self._merge_directions(final)))
        return outputs, state
