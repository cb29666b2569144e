"""Word alignment: which source word each target word comes from. Start at `aligner` (pairs
as the model's pieces, where links come from, eflomal, the alignment loss's labels, `align`);
`links` holds links as data (Pharaoh, gold, AER, symmetrisation), `text` the gold standard's
text conventions. The commands are the translate app's."""
