"""Show, Attend and Tell (Xu et al., 2015): a CNN feature map + an LSTM decoder with attention.

`Captioner` (built from a `CaptionerConfig`) attends from its state over the ``H x W``
locations of the feature map at every word (soft: `SpatialAttention` with the gate ``beta_t``;
hard: `HardAttention`); `caption_loss` adds the doubly stochastic regulariser. It has the step
API of the translation models (`attnkit.models.step`), so `attnkit.decoding` decodes it. The
equations and the choices of ``init_pool``: docs/concepts.md ("The captioner")."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.additive import AdditiveAttention
from attnkit.attention.base import AttentionMemory
from attnkit.attention.hard import HardAttention
from attnkit.attention.spatial import SpatialAttention
from attnkit.models.config import SpecialIds, check_choices
from attnkit.models.losses import masked_cross_entropy
from attnkit.models.step import StepOutput, Weights, check_targets, check_weights, stacked_steps

ATTENTIONS = ("soft", "hard")
INIT_POOLS = ("mean", "mean+max", "none", "glimpse")
CONFIG_VERSION = 2


def _block(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ConvEncoder(nn.Module):
    """Stride-2 conv blocks, then a stride-1 one: ``[batch, 3, S, S] -> [batch, C, S/2^k, S/2^k]``;
    trained from scratch, with a small receptive field (a location is that part of the image).

    Args:
        image_size: input side ``S`` in pixels (images uint8 0..255 or float 0..1).
        feature_size: side of the output map (``S / feature_size`` a power of two).
        channels: output channels ``C``; the stride-2 blocks double their width up to it.
        global_context: squeeze-and-excitation gates from the whole image's mean feature.
    """

    def __init__(self, image_size: int = 64, feature_size: int = 8, channels: int = 64, *,
                 global_context: bool = False):
        super().__init__()
        ratio = image_size // feature_size if feature_size > 0 else 0
        if ratio < 2 or ratio * feature_size != image_size or ratio & (ratio - 1):
            raise ValueError(f"image_size / feature_size must be a power of two >= 2, got "
                             f"{image_size} / {feature_size}")
        self.image_size = image_size
        steps = int(math.log2(ratio))
        width = [max(8, channels >> (steps - 1 - i)) for i in range(steps)]  # doubles up to C
        stride2 = (_block(cin, w, 2) for cin, w in zip([3, *width[:-1]], width, strict=True))
        self.net = nn.Sequential(*stride2, _block(width[-1], channels, 1))
        # Squeeze-and-excitation (Hu et al., 2018): channel gates from the image mean. The
        # product lets a location say "I am red AND red is the minority here" while background
        # locations, whose object channels are ~0, stay empty: relational facts live at the
        # objects, where attention can find them.
        self.context = (nn.Sequential(nn.Linear(channels, channels), nn.ReLU(),
                                      nn.Linear(channels, channels))
                        if global_context else None)

    def forward(self, images: Tensor) -> Tensor:
        if images.dim() != 4 or tuple(images.shape[1:]) != (3, self.image_size, self.image_size):
            raise ValueError(f"images must have shape [batch, 3, {self.image_size}, "
                             f"{self.image_size}], got {tuple(images.shape)}")
        x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        feats = self.net(x - 0.5)  # centred input; BatchNorm does the rest
        if self.context is not None:
            gate = torch.sigmoid(self.context(feats.mean((2, 3))))  # [batch, C]
            feats = feats * (2.0 * gate)[:, :, None, None]  # 2x: the identity at gate 0.5
        return feats


@dataclass
class CaptionerConfig(SpecialIds):
    """Everything needed to rebuild a `Captioner` (JSON scalars only).

    Args:
        vocab_size, image_size, feature_size, channels: specials included; input side in
            pixels; the feature map's side and ``C``.
        emb_dim, hidden, attention_units: word embedding, LSTM and additive score sizes.
        attention, gate: ``"soft"`` or ``"hard"``; the gating scalar beta on the soft context.
        dropout, max_caption_len: before the output layer; words decoded at most (plus EOS).
        doubly_stochastic, global_context: lambda of the regulariser; squeeze-and-excitation
            gates in the encoder.
        init_pool, glimpses: what ``h_0, c_0`` come from (``"mean"``, ``"mean+max"``, ``"none"``
            or ``"glimpse"``) and attention hops per word (docs/concepts.md, "The captioner").
    """

    vocab_size: int = 0
    image_size: int = 64
    feature_size: int = 8
    channels: int = 64
    emb_dim: int = 64
    hidden: int = 128
    attention_units: int = 64
    attention: str = "soft"
    gate: bool = True
    dropout: float = 0.1
    max_caption_len: int = 20
    doubly_stochastic: float = 0.0
    init_pool: str = "glimpse"
    global_context: bool = True
    glimpses: int = 1
    arch: str = "captioner"
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        if self.vocab_size <= 4:
            raise ValueError(f"vocab_size must exceed the 4 specials, got {self.vocab_size}")
        check_choices(self, attention=ATTENTIONS, init_pool=INIT_POOLS)
        if min(self.channels, self.emb_dim, self.hidden, self.attention_units,
               self.max_caption_len, self.glimpses) < 1:
            raise ValueError("channels, emb_dim, hidden, attention_units, max_caption_len and "
                             "glimpses must be >= 1")
        if self.doubly_stochastic < 0:
            raise ValueError(f"doubly_stochastic must be >= 0, got {self.doubly_stochastic}")
        if self.version != CONFIG_VERSION:
            raise ValueError(f"captioner config version {self.version!r} is not one this "
                             f"attnkit reads ({CONFIG_VERSION}; a newer attnkit wrote it?)")


@dataclass
class CaptionState:
    """Decoder state, ``beams`` rows per image (as the step API): the LSTM's ``h, c [rows,
    hidden]``; the attention memory of each image and the feature map's size; ``query [rows,
    hidden]``, the next step's first query when it is not ``h``; the features ``source
    [images, H*W, C]``."""

    h: Tensor
    c: Tensor
    memory: AttentionMemory
    height: int
    width: int
    query: Tensor | None = None
    source: Tensor | None = None
    encoder_weights: None = None


def _mlp(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(cin, cout), nn.ReLU(), nn.Linear(cout, cout))


class Captioner(nn.Module):
    """CNN encoder + LSTM decoder with spatial attention, built from a `CaptionerConfig`.

    ``model(images [batch, 3, S, S], tgt_in [batch, T], location_mask=None)`` -> ``(logits
    [batch, T, V], alphas [batch, T, H, W])``, teacher-forced; images uint8 (0..255) or float
    (0..1); ``location_mask [batch, H, W]`` bool, True = may be attended.
    """

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.config = c = config
        self.encoder = ConvEncoder(c.image_size, c.feature_size, c.channels,
                                   global_context=c.global_context)
        self.embed = nn.Embedding(c.vocab_size, c.emb_dim, padding_idx=c.pad_id)
        if c.attention == "soft":
            self.attention: nn.Module = SpatialAttention(c.hidden, c.channels,
                                                         c.attention_units, gate=c.gate)
        else:
            self.attention = HardAttention(AdditiveAttention(c.hidden, c.channels,
                                                             c.attention_units))
        # f_init,h and f_init,c of the paper (docs/concepts.md, "The captioner").
        if c.init_pool in ("none", "glimpse"):
            self.h0 = nn.Parameter(torch.zeros(c.hidden))
            self.c0 = nn.Parameter(torch.zeros(c.hidden))
        else:
            pooled = c.channels * (2 if c.init_pool == "mean+max" else 1)
            self.init_norm = nn.BatchNorm1d(pooled)
            self.init_h = _mlp(pooled, c.hidden)
            self.init_c = _mlp(pooled, c.hidden)
        self.glimpse = nn.Linear(c.hidden + c.channels, c.hidden) \
            if c.glimpses > 1 or c.init_pool == "glimpse" else None
        if c.init_pool == "glimpse" and c.glimpses == 1:
            # The first query starts at zero, where init_pool="none" starts (h_0 = tanh(0)),
            # so the glimpse begins as a no-op and learns how far to move it.
            nn.init.zeros_(self.glimpse.weight)
            nn.init.zeros_(self.glimpse.bias)
        self.cell = nn.LSTMCell(c.emb_dim + c.channels, c.hidden)
        self.out_h = nn.Linear(c.hidden, c.emb_dim)
        self.out_z = nn.Linear(c.channels, c.emb_dim)
        self.drop = nn.Dropout(c.dropout)
        self.out = nn.Linear(c.emb_dim, c.vocab_size)

    # ------------------------------------------------------------------ step API
    def encode(self, images: Tensor, src_lengths: Tensor | None = None, *, beams: int = 1,
               use_cache: bool = True, weights: Weights = "none",
               location_mask: Tensor | None = None,
               features: Tensor | None = None) -> CaptionState:
        """Features, attention memory (once per image) and ``h_0, c_0``, ``beams`` rows per
        image. ``src_lengths``, ``use_cache`` and ``weights`` are ignored; ``features [B, C,
        H, W]`` replaces the encoder's output (attributions take gradients with respect to it).
        """
        check_weights(weights)
        feats = self.encoder(images) if features is None else features  # [B, C, H, W]
        batch, _, height, width = feats.shape
        if location_mask is not None and (location_mask.dtype != torch.bool or tuple(
                location_mask.shape) != (batch, height, width)):
            raise ValueError(f"location_mask must be bool [{batch}, {height}, {width}] "
                             f"(True = may attend), got {location_mask.dtype} "
                             f"{tuple(location_mask.shape)}")
        flat = feats.flatten(2).transpose(1, 2)  # [B, H*W, C]
        if isinstance(self.attention, SpatialAttention):
            memory = self.attention.memory(feats, key_mask=location_mask)
        else:
            memory = self.attention.memory(
                flat, key_mask=None if location_mask is None else location_mask.flatten(1))
        query = None
        if self.config.init_pool in ("none", "glimpse"):
            h0, c0 = (torch.tanh(p).to(flat.dtype).expand(batch, -1) for p in (self.h0, self.c0))
            if self.config.init_pool == "glimpse":
                seen, _ = self._look(h0, memory)
                query = torch.tanh(self.glimpse(torch.cat([h0, seen], -1)))
        else:
            h0, c0 = self._initial_state(flat, location_mask)
        state = CaptionState(h0, c0, memory, height, width, query, flat)
        if beams > 1:
            rows = torch.arange(batch, device=flat.device).repeat_interleave(beams)
            state = self.reorder(state, rows)
        return state

    def _initial_state(self, flat: Tensor, location_mask: Tensor | None
                       ) -> tuple[Tensor, Tensor]:
        """``h_0, c_0`` from the pooled features ``flat [B, H*W, C]`` (``f_init``)."""
        if location_mask is None:
            mean, top = flat.mean(1), flat.amax(1)
        else:
            keep = location_mask.flatten(1).unsqueeze(-1)
            mean = (flat * keep).sum(1) / keep.sum(1).clamp_min(1)
            top = flat.masked_fill(~keep, 0.0).amax(1)  # features are ReLU outputs, >= 0
        pooled = torch.cat([mean, top], -1) if self.config.init_pool == "mean+max" else mean
        if self.training and flat.shape[0] == 1:
            # BatchNorm cannot take statistics of one image: use the running ones.
            n = self.init_norm
            pooled = nn.functional.batch_norm(pooled, n.running_mean, n.running_var, n.weight,
                                              n.bias, False, 0.0, n.eps)
        else:
            pooled = self.init_norm(pooled)
        return torch.tanh(self.init_h(pooled)), torch.tanh(self.init_c(pooled))

    def word_step(self, prev_tokens: Tensor, state: CaptionState) -> tuple[Tensor, CaptionState,
                                                                            Tensor]:
        """One word: ``prev_tokens [rows]`` -> logits ``[rows, V]``, new state, ``alpha [rows,
        H, W]``."""
        emb = self.embed(prev_tokens)
        context, alpha = self._look(state.h if state.query is None else state.query,
                                    state.memory)
        for _ in range(self.config.glimpses - 1):
            query = torch.tanh(self.glimpse(torch.cat([state.h, context], -1)))
            context, alpha = self._look(query, state.memory)
        h, c = self.cell(torch.cat([emb, context], -1), (state.h, state.c))
        logits = self.out(self.drop(emb + self.out_h(h) + self.out_z(context)))
        alpha = alpha.reshape(alpha.shape[0], state.height, state.width)
        return logits, dataclasses.replace(state, h=h, c=c, query=None), alpha

    def _look(self, query: Tensor, memory: AttentionMemory) -> tuple[Tensor, Tensor]:
        """One glimpse: ``query [rows, hidden]`` -> context ``[rows, C]``, map ``[rows,
        H*W]``; the rows of an image (beams) are its queries over its one memory."""
        rows, images = query.shape[0], memory.values.shape[0]
        grouped = query.view(images, rows // images, -1)
        context, alpha = self.attention.attend(grouped, memory, need_weights=True)
        return context.reshape(rows, -1), alpha.reshape(rows, -1)

    def step(self, tokens: Tensor, state: CaptionState, *, weights: Weights = "none",
             logits: bool = True) -> StepOutput:
        """Feed ``tokens [rows, t]`` one word at a time (the step API, `attnkit.models.step`):
        the logits ``[rows, t, V]``; the maps flattened, ``[rows, t, H*W]`` (``"all"``:
        ``[rows, t, 1, 1, H*W]``)."""
        check_weights(weights)
        words, maps = [], []
        for i in range(tokens.shape[1]):
            word_logits, state, alpha = self.word_step(tokens[:, i], state)
            words.append(word_logits)
            maps.append(alpha.flatten(1))
        return stacked_steps(words, maps, state, weights, logits)

    def reorder(self, state: CaptionState, rows: Tensor,
                images: Tensor | None = None) -> CaptionState:
        """Keep rows ``rows`` and, when some captions finished, the images ``images``."""
        out = dataclasses.replace(state, h=state.h[rows], c=state.c[rows],
                                  query=None if state.query is None else state.query[rows])
        if images is not None:
            out.memory, out.source = state.memory.reorder(images), state.source[images]
        return out

    def forward(self, images: Tensor, tgt_in: Tensor, *,
                location_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        check_targets(images, tgt_in)
        out = self.step(tgt_in, self.encode(images, location_mask=location_mask), weights="last")
        return out.logits, out.weights.unflatten(-1, (out.state.height, out.state.width))


def doubly_stochastic_penalty(alphas: Tensor, lengths: Tensor) -> Tensor:
    """``mean_b sum_pixels (1 - sum_{t < len_b} alpha_{b,t})^2`` (Show, Attend and Tell, eq. 14):
    ``alphas [batch, T, H, W]``, ``lengths [batch]`` real steps (words + EOS); a scalar.
    """
    if alphas.dim() != 4 or lengths.shape != alphas.shape[:1]:
        raise ValueError(f"alphas must be [batch, T, H, W] and lengths [batch]; got "
                         f"{tuple(alphas.shape)} and {tuple(lengths.shape)}")
    steps = torch.arange(alphas.shape[1], device=alphas.device)
    real = (steps.unsqueeze(0) < lengths.to(alphas.device).unsqueeze(1)).to(alphas.dtype)
    total = (alphas * real[:, :, None, None]).sum(1)  # [B, H, W]
    return ((1.0 - total) ** 2).flatten(1).sum(1).mean()


def attention_supervision_penalty(alphas: Tensor, targets: Tensor) -> Tensor:
    """``mean_words -log(sum_l alpha_l * target_l)`` (Liu et al., 2017), a scalar: ``alphas`` and
    ``targets`` ``[batch, T, H, W]``; words with an all-zero target are not supervised.
    """
    if targets.shape != alphas.shape:
        raise ValueError(f"targets must have the shape of alphas {tuple(alphas.shape)} "
                         f"[batch, T, H, W], got {tuple(targets.shape)}")
    targets = targets.to(alphas.dtype)
    supervised = targets.flatten(2).amax(-1) > 0  # [B, T]
    if not bool(supervised.any()):
        return alphas.sum() * 0.0
    mass = (alphas * targets).flatten(2).sum(-1)[supervised]
    return -torch.log(mass.clamp_min(1e-6)).mean()


def caption_loss(model: Captioner, images: Tensor, tgt_in: Tensor, tgt_out: Tensor,
                 lengths: Tensor, target_maps: Tensor | None = None,
                 supervision: float = 0.0) -> tuple[Tensor, Tensor, int]:
    """``(loss, cross_entropy, token_count)``: token cross-entropy + ``config.doubly_stochastic`` *
    the attention penalty (+ ``supervision`` * `attention_supervision_penalty` with
    ``target_maps [batch, T, H, W]``).

    ``tgt_in``/``tgt_out [batch, T]`` (BOS + words, words + EOS, padded); ``lengths [batch]``.
    """
    logits, alphas = model(images, tgt_in)
    ce, count = masked_cross_entropy(logits, tgt_out, pad_id=model.config.pad_id)
    lam = model.config.doubly_stochastic
    loss = ce + lam * doubly_stochastic_penalty(alphas, lengths) if lam > 0 else ce
    if supervision > 0 and target_maps is not None:
        loss = loss + supervision * attention_supervision_penalty(alphas, target_maps)
    return loss, ce.detach(), count
