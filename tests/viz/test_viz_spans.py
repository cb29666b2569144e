from attnkit.data.classification_text import WordTokenizer
from attnkit.viz.spans import token_spans


def _pieces(text, spans):
    return [None if s is None else text[s[0]:s[1]] for s in spans]


def test_word_tokens_map_back_to_original_case_and_punctuation():
    text = "Great film, isn't it?!"
    spans = token_spans(text, ["great", "film", "isn't", "it"])
    assert spans == [(0, 5), (6, 10), (12, 17), (18, 20)]  # counted by hand
    assert _pieces(text, spans) == ["Great", "film", "isn't", "it"]


def test_real_tokenizer_on_an_imdb_style_review():
    text = "I LOVED it.<br /><br />Not a FLOP: 10/10!"
    tokens = WordTokenizer().tokenize(text)
    assert tokens == ["i", "loved", "it", "not", "a", "flop", "10", "10"]
    assert _pieces(text, token_spans(text, tokens)) == [
        "I", "LOVED", "it", "Not", "a", "FLOP", "10", "10"]


def test_repeated_words_advance_left_to_right():
    text = "the cat saw the dog"
    assert token_spans(text, ["the", "the", "dog"]) == [(0, 3), (12, 15), (16, 19)]


def test_unknown_tokens_get_none_and_the_search_goes_on():
    text = "a zebra b"
    assert token_spans(text, ["a", "<unk>", "b"]) == [(0, 1), None, (8, 9)]


def test_subword_marks_and_lowercase_that_changes_length():
    text = "İstanbul rocks"  # "İ".lower() is two characters: "i" + a combining dot
    assert WordTokenizer().tokenize(text)[0] == "i\u0307stanbul"
    spans = token_spans(text, ["\u2581i\u0307stanbul", "\u2581rock", "s"])
    assert spans == [(0, 8), (9, 13), (13, 14)]
    assert _pieces(text, spans) == ["İstanbul", "rock", "s"]


def test_from_end_puts_a_kept_suffix_on_its_last_use():
    text = "good bad good"
    assert token_spans(text, ["good"]) == [(0, 4)]
    assert token_spans(text, ["good"], from_end=True) == [(9, 13)]
    assert token_spans(text, ["bad", "good"], from_end=True) == [(5, 8), (9, 13)]
