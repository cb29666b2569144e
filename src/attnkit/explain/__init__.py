"""Explanations of a model's outputs beside its attention, and how far to trust each.

`captum` (gradient methods, optional), then per model family `translation`, `sentiment` (with
its faithfulness) and `captions` (with grounding and the pointing game); `trust`, the method a
page opens on. The apps call these; the models know nothing of them."""
