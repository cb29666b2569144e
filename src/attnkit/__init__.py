"""attnkit: neural attention mechanisms for PyTorch, correct, fast, explained, ready to train.

Subpackages (lower layers never import higher ones):
``attention`` and ``positional`` -> ``models`` -> ``decoding``; ``data``; ``training``; ``viz``;
``apps`` (wire data + model + trainer + viz); ``cli`` (argument parsing only).
"""

__version__ = "0.1.0"
