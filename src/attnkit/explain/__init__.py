"""Explanations of a model's outputs beside its attention, and how far to trust each.

* `attnkit.explain.captum`: gradient x input and integrated gradients through Captum (an
  optional dependency: ``pip install 'attnkit[explain]'``), and the ``--explain`` methods.
* `attnkit.explain.translation`, `attnkit.explain.sentiment`, `attnkit.explain.captions`: what
  those methods give for each model family (source pieces per target piece, tokens per
  verdict, feature-map cells per caption word).
* `attnkit.explain.faithfulness` (ERASER's comprehensiveness and sufficiency of sentiment
  explanations), `attnkit.explain.grounding` and `attnkit.explain.pointing` (does a caption
  word's map land on the ducks it names?): the figures behind the trust guide.
* `attnkit.explain.trust`: which method a page opens on, by such a figure, and the sentence
  saying why.

The apps call these; the models know nothing of them.
"""
