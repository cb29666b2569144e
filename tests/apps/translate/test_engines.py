"""attnkit's engine: attention only when shown, and `<unk>` replacement without it (the rows of
the outputs that hold an `<unk>` come from one forced pass) giving the same words."""

import pytest
import torch

from attnkit.apps.translate import engines
from attnkit.apps.translate.engines import AttnkitEngine
from attnkit.apps.translate.pipeline import TranslatePipeline, source_limit
from attnkit.data.text_codec import TextCodec
from attnkit.data.vocab import Vocab
from attnkit.models import RNNSeq2Seq, RNNSeq2SeqConfig, TransformerConfig, TransformerSeq2Seq

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h"]
SENTENCES = ["a b c d .", "e f", "g h a b c", "d e f g h a"]
# Logits added to the output layer's: enough <unk> among other words, and no early <eos>.
PUSH = {"rnn": {"<unk>": 0.3, "<eos>": -1.0},
        "transformer": {"<unk>": 0.4, "<eos>": -3.0, "<pad>": -9.0, "<bos>": -9.0, ".": -3.0}}


def engine(kind: str) -> AttnkitEngine:
    """An untrained model whose output layer favours `<unk>` (a hook adds to its logit), so
    most outputs hold some."""
    torch.manual_seed(0)
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *WORDS, "."])
    if kind == "rnn":
        model = RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab=len(vocab), tgt_vocab=len(vocab),
                                            emb_dim=8, hidden=16))
        out = model.decoder.out
    else:
        model = TransformerSeq2Seq(TransformerConfig(src_vocab=len(vocab), tgt_vocab=len(vocab),
                                                     d_model=16, heads=2, layers=2, ff_dim=32))
        out = model.out
    push = torch.zeros(len(vocab))
    for word, logit in PUSH[kind].items():
        push[vocab.stoi[word]] = logit
    out.register_forward_hook(lambda module, args, logits: logits + push)
    return AttnkitEngine(model.eval(), TranslatePipeline(TextCodec(), vocab, vocab,
                                                         source_limit(model.config)))


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("kind", ["rnn", "transformer"])
@pytest.mark.parametrize("beam", [1, 3])
def test_unk_replacement_without_attention_gives_the_same_words(kind, beam):
    e = engine(kind)
    raw = e.translate(SENTENCES, beam=beam, unk_replace=False)
    assert sum("<unk>" in p.tokens for p in raw) >= 2      # something to replace
    shown = e.translate(SENTENCES, beam=beam, attention=True)
    hidden = e.translate(SENTENCES, beam=beam, attention=False)
    assert [p.tokens for p in hidden] == [p.tokens for p in shown]
    assert all("<unk>" not in p.tokens for p in hidden)
    assert all(p.weights is None for p in hidden) and all(p.weights is not None for p in shown)


@pytest.mark.usefixtures("one_thread")
def test_only_the_outputs_with_an_unk_are_fed_again(monkeypatch):
    e = engine("rnn")
    raw = e.translate(SENTENCES, beam=3, unk_replace=False)
    with_unk = sum("<unk>" in p.tokens for p in raw)
    assert with_unk >= 2
    fed = []
    real = engines.forced_decode
    monkeypatch.setattr(engines, "forced_decode",
                        lambda model, src, tgt, **kw: fed.append(len(tgt)) or real(model, src, tgt,
                                                                                 **kw))
    e.translate(SENTENCES, beam=3)
    assert fed == [with_unk]
    fed.clear()
    e.translate(SENTENCES[:2], attention=True)   # the rows are there already: no second pass
    e.translate(SENTENCES[:2], unk_replace=False)
    assert fed == []


def test_special_ids_and_unknown_words_are_what_both_engines_drop_and_report():
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *WORDS])
    assert engines.special_ids(vocab) == {vocab.pad_id, vocab.bos_id, vocab.eos_id}
    assert vocab.unk_id not in engines.special_ids(vocab)
    pipeline = TranslatePipeline(TextCodec(), vocab, vocab, 50)
    a, unk = vocab.stoi["a"], vocab.unk_id
    # A word run: the words its vocabulary maps to <unk>; punctuation is no word.
    got = engines.reading(pipeline, ["a", "zorb", "a", "quux", "."], [a, unk, a, unk, unk])
    assert got == {"unknown": 0.5, "unknown_words": ["zorb", "quux"], "word_count": 4,
                   "subword": False}
    assert engines.reading(pipeline, ["a", "a"], [a, a])["unknown"] == 0.0
