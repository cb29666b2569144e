"""A small convolutional image encoder trained from scratch: image -> feature map.

No pretrained backbone is available offline, so the captioner learns its own features. The
network halves the resolution ``log2(image_size / feature_size)`` times (3 times: 64 px -> 8x8)
and keeps the receptive field small (about half a 64 px image), so each location describes its
own neighbourhood and attending to a location means looking at that part of the image.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def _block(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ConvEncoder(nn.Module):
    """Stride-2 conv blocks, then a stride-1 one: ``[batch, 3, S, S] -> [batch, C, S/2^k, S/2^k]``.

    Args:
        image_size: input side ``S`` in pixels (images uint8 0..255 or float 0..1).
        feature_size: side of the output map (``S / feature_size`` a power of two).
        channels: output channels ``C``; the stride-2 blocks double their width up to it.
        global_context: squeeze-and-excitation gates from the whole image's mean feature.

    Example:
        >>> enc = ConvEncoder(64, 8, 64)
        >>> enc(torch.zeros(2, 3, 64, 64, dtype=torch.uint8)).shape
        torch.Size([2, 64, 8, 8])
    """

    def __init__(self, image_size: int = 64, feature_size: int = 8, channels: int = 64, *,
                 global_context: bool = False):
        super().__init__()
        ratio = image_size // feature_size if feature_size > 0 else 0
        if ratio < 2 or ratio * feature_size != image_size or ratio & (ratio - 1):
            raise ValueError(f"image_size / feature_size must be a power of two >= 2, got "
                             f"{image_size} / {feature_size}")
        self.image_size = image_size
        self.feature_size = feature_size
        self.channels = channels
        steps = int(math.log2(ratio))
        width = [max(8, channels >> (steps - 1 - i)) for i in range(steps)]  # doubles up to C
        layers, cin = [], 3
        for w in width:
            layers.append(_block(cin, w, 2))
            cin = w
        layers.append(_block(cin, channels, 1))
        self.net = nn.Sequential(*layers)
        # Squeeze-and-excitation (Hu et al., 2018): channel gates from the image mean. The
        # product lets a location say "I am red AND red is the minority here" while background
        # locations, whose object channels are ~0, stay empty: relational facts live at the
        # objects, where attention can find them.
        self.context = (nn.Sequential(nn.Linear(channels, channels), nn.ReLU(),
                                      nn.Linear(channels, channels))
                        if global_context else None)

    def forward(self, images: Tensor) -> Tensor:
        if (not isinstance(images, Tensor) or images.dim() != 4 or images.shape[1] != 3
                or tuple(images.shape[2:]) != (self.image_size, self.image_size)):
            got = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
            raise ValueError(f"images must have shape [batch, 3, {self.image_size}, "
                             f"{self.image_size}], got {got}")
        x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        feats = self.net(x - 0.5)  # centred input; BatchNorm does the rest
        if self.context is not None:
            gate = torch.sigmoid(self.context(feats.mean((2, 3))))  # [batch, C]
            feats = feats * (2.0 * gate)[:, :, None, None]  # 2x: the identity at gate 0.5
        return feats
