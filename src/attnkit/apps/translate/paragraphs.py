"""Texts translated sentence by sentence: what ``translate predict``, ``translate eval`` of a
raw pairs file and ``attnkit serve`` do with their inputs (one place, so they agree).

The models are trained on single sentences; given a paragraph they translate about one
sentence of it and drop the rest. So each text is cut into sentences
(`attnkit.data.sentences`), the sentences of every text are translated as one batch (the
engine groups them by length), and each text gets back its sentences' translations joined
with its own breaks (spaces, line breaks, blank lines between paragraphs). A text of several
sentences becomes one `TranslationPrediction` holding each sentence's own prediction, with
its attention, in ``sentences``; a text of one sentence is translated exactly as given.

Example:
    ```python
    preds = translate_texts(loaded.engine, ["The cat is black. She will find the dogs."])
    preds[0].text                                # "Le chat est noir. Elle trouvera les chiens."
    [p.weights.shape for p in preds[0].sentences]   # one [T_tgt, T_src] per sentence
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnkit.apps.translate.pipeline import encode_source
from attnkit.apps.translate.prediction import TranslationPrediction
from attnkit.data.sentences import Sentences, per_sentence, readable_sentences
from attnkit.data.text_codec import SRC_LANG


def translate_texts(engine: Any, texts: Sequence[str], *, split: bool = True,
                    **decoding: Any) -> list[TranslationPrediction]:
    """Translate ``texts``, each cut into sentences unless ``split`` is False.

    Args:
        engine: the run's engine (`attnkit.apps.translate.engines.Engine`).
        texts: the inputs (sentences, paragraphs, several paragraphs).
        split: cut each text into sentences (module doc); False: each text is one sentence
            to the model, whatever its length.
        **decoding: `Engine.translate`'s options (beam, alpha, unk_replace, batch_size,
            attention).

    Returns:
        One prediction per text, in order.

    Raises:
        UsageError: a text without any token the model reads (naming it), a bad beam or batch
            size.
    """
    if not split:
        return engine.translate(texts, **decoding)
    cuts = [text_sentences(engine, text, i) for i, text in enumerate(texts, 1)]
    return per_sentence(texts, cuts, lambda flat: engine.translate(flat, **decoding),
                        lambda text, parts, cut: TranslationPrediction.paragraph(
                            text, parts, cut.join([p.text for p in parts])))


def text_sentences(engine: Any, text: str, index: int) -> Sentences | None:
    """``text``'s sentences that hold a token the model reads, or None when there is only
    one (the text is then translated as given; `attnkit.data.sentences.readable_sentences`).
    Also what a stream of a text decodes, one sentence after another
    (`attnkit.apps.translate.streaming.stream_texts`).

    Raises:
        UsageError: no token at all in ``text`` (``index`` names it).
    """
    codec = engine.pipeline.codec
    found = readable_sentences(text, SRC_LANG,
                               lambda s: bool(codec.encode_capped(s, SRC_LANG, 1)[0]))
    if found is None:
        encode_source(engine.pipeline, text, index)   # an empty text: its one-line error
    return found
