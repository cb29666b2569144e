"""Explanations of a model's outputs beside its attention, and how far to trust each.

`captum` (gradient methods, optional), then per model family `sentiment` (with its
faithfulness) and `captions` (with grounding and the pointing game; a translation's are
`attnkit.alignment.aligner.attribution_rows`); `trust`, the method a page opens on. The apps
call these; the models know nothing of them."""
