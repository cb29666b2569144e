"""Word alignment with an attention translation model: which source word each target word
comes from.

* `attnkit.alignment.links`: links as data (Pharaoh, gold files, AER), symmetrisation, links
  drawn from score matrices; `attnkit.alignment.text`: the text conventions of alignment;
* `attnkit.alignment.pieces`: sentence pairs as the model reads them, each piece traced to its
  word; `attnkit.alignment.methods`: where links come from (attention, rollout, the trained
  alignment head, gradient attributions); `attnkit.alignment.aligner`: all of it for given pairs;
* `attnkit.alignment.eflomal` and `attnkit.alignment.head_training`: eflomal's links as labels,
  the alignment head trained and adapted on them.

The commands (``attnkit translate align`` / ``align-train``) are the translate app's.
"""
