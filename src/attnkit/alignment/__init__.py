"""Word alignment with an attention translation model: which source word each target word
comes from. `links` (links as data, AER, symmetrisation), `text` (alignment's text
conventions), `pieces` (pairs as the model reads them), `methods` (where links come from),
`aligner` (all of it for given pairs), `eflomal` and `head_training` (the trained aligner).
The commands (``attnkit translate align`` / ``align-train``) are the translate app's."""
