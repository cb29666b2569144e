"""Texts translated sentence by sentence, as ``translate predict``, ``translate eval`` of a raw
pairs file and ``attnkit serve`` all do (docs/guide/translate.md): each text is cut into
sentences (`attnkit.data.sentences`), all sentences are translated as one batch, and each
text gets its translations joined with its own breaks; its `TranslationPrediction` holds
each sentence's own in ``sentences``. A text of one sentence is translated as given.
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
    """Translate ``texts`` (``split=False``: each is one sentence), one prediction per text, in
    order; ``**decoding``: `Engine.translate`'s options. UsageError: a text without any token
    the model reads (named), a bad beam or batch size.
    """
    if not split:
        return engine.translate(texts, **decoding)
    cuts = [text_sentences(engine, text, i) for i, text in enumerate(texts, 1)]
    return per_sentence(texts, cuts, lambda flat: engine.translate(flat, **decoding),
                        lambda text, parts, cut: TranslationPrediction.paragraph(
                            text, parts, cut.join([p.text for p in parts])))


def text_sentences(engine: Any, text: str, index: int) -> Sentences | None:
    """``text``'s sentences that hold a token the model reads, or None when there is only one
    (also what `streaming.stream_texts` decodes). UsageError: no token (``index`` names it).
    """
    codec = engine.pipeline.codec
    found = readable_sentences(text, SRC_LANG,
                               lambda s: bool(codec.encode_capped(s, SRC_LANG, 1)[0]))
    if found is None:
        encode_source(engine.pipeline, text, index)   # an empty text: its one-line error
    return found
