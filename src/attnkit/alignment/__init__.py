"""Word alignment with an attention translation model: which source word each target word
comes from.

* `attnkit.alignment.pieces`: sentence pairs as the model reads them, each piece traced to its
  word;
* `attnkit.alignment.methods`: where links come from (a layer's or head's attention, rollout,
  the trained alignment head, gradient attributions), as piece matrices;
* `attnkit.alignment.labels`: eflomal's links as the alignment head's labels;
* `attnkit.alignment.head_training`: fitting the head (`attnkit.models.alignment_head`) on them.

Files of alignments, link extraction and symmetrisation are `attnkit.data`'s; the commands
(``attnkit translate align`` / ``align-train``) and a run's trained aligner are the translate
app's (`attnkit.apps.translate.alignment`).
"""
