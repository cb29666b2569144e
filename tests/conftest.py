"""Shared fixtures: the real datasets in ../shared/data (when this checkout has them), and a toy
translation task the model and decoding tests share (reverse a sentence and shift its ids)."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def _shared(name: str) -> Path:
    folder = SHARED_DATA / name
    if not (folder / "DONE").exists():
        pytest.skip(f"shared dataset {folder} is absent")
    return folder


@pytest.fixture
def eng_fra_dir() -> Path:
    """``../shared/data/eng-fra`` (train/valid/test .tsv.gz); skips the test where it is absent."""
    return _shared("eng-fra")


@pytest.fixture
def imdb_dir() -> Path:
    """``../shared/data/imdb`` (train/test .jsonl.gz); skips the test where it is absent."""
    return _shared("imdb")


# ---------------------------------------------------------------- toy translation task
PAD, BOS, EOS, UNK = 0, 1, 2, 3
FIRST_WORD = 4


def toy_pairs(n: int, vocab: int = 12, seed: int = 0, min_len: int = 2, max_len: int = 6):
    """``n`` pairs (src ids, tgt ids): the target is the reversed source, each id + 1."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        src = torch.randint(FIRST_WORD, vocab - 1, (length,), generator=g).tolist()
        tgt = [w + 1 for w in reversed(src)]
        pairs.append((src, tgt))
    return pairs


def toy_batch(pairs):
    """Padded tensors ``src [B, S]`` (EOS-terminated), ``src_lengths``, ``tgt_in``, ``tgt_out``."""
    srcs = [s + [EOS] for s, _ in pairs]
    tins = [[BOS] + t for _, t in pairs]
    touts = [t + [EOS] for _, t in pairs]

    def pad(seqs):
        width = max(len(s) for s in seqs)
        return torch.tensor([s + [PAD] * (width - len(s)) for s in seqs])

    return pad(srcs), torch.tensor([len(s) for s in srcs]), pad(tins), pad(touts)


@pytest.fixture(autouse=True)
def _restore_threads():
    """Apps set torch's thread count (``--threads``); no test may leak it into the next."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def one_thread():
    """Tiny models: one thread is faster than two, by far when other processes share the CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)



@pytest.fixture(scope="session")
def toy():
    """``toy.pairs(n, vocab, seed)``, ``toy.batch(pairs)`` and the special ids."""
    return SimpleNamespace(pairs=toy_pairs, batch=toy_batch, PAD=PAD, BOS=BOS, EOS=EOS, UNK=UNK)


NUMBER_WORDS = {"one": "un", "two": "deux", "three": "trois", "four": "quatre", "five": "cinq",
                "six": "six", "seven": "sept", "eight": "huit", "nine": "neuf", "ten": "dix"}


def write_number_pairs(path, n: int = 300, seed: int = 1, words: int = 10,
                       max_words: int = 5) -> Path:
    """A pairs file of word-for-word number sentences ("one two ." -> "un deux ."), learnt
    in seconds: ``n`` lines of 2..``max_words`` of the first ``words`` number words."""
    vocab = list(NUMBER_WORDS)[:words]
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        en = rng.choices(vocab, k=rng.randint(2, max_words))
        lines.append(" ".join(en) + " .\t" + " ".join(NUMBER_WORDS[w] for w in en) + " .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def number_pairs():
    """``number_pairs(path, n, seed, words, max_words)`` writes a toy pairs file
    (:func:`write_number_pairs`)."""
    return write_number_pairs


def _chromium() -> str | None:
    for cand in (os.environ.get("ATTNKIT_CHROMIUM"), shutil.which("chromium"),
                 shutil.which("chromium-browser"), "/usr/bin/chromium"):
        if cand and os.path.exists(cand):
            return cand
    return None


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by Playwright, for the browser tests (``pytest -m browser``);
    they skip when the ``playwright`` package or a ``chromium`` executable is missing."""
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the playwright package is missing")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium executable (apt-get install chromium, or set ATTNKIT_CHROMIUM)")
    with sync_api.sync_playwright() as pw:
        # --no-sandbox: Chromium's sandbox refuses to start as root (CI containers).
        b = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def _greedy_margin(model, batches) -> float:
    """The smallest gap between the best and the second-best log-probability at any step of the
    eager ``model``'s greedy decoding of ``batches`` (``(src, lengths)`` pairs), teacher-forced on
    its own output."""
    from attnkit.decoding import greedy_decode

    gaps = []
    with torch.no_grad():
        for src, lengths in batches:
            for b, hyp in enumerate(greedy_decode(model, src, lengths, need_weights=False,
                                                  max_len=20)):
                tgt_in = torch.tensor([[model.config.bos_id, *hyp.tokens]])
                logp = model(src[b:b + 1, :int(lengths[b])], lengths[b:b + 1], tgt_in)
                top = logp.log_softmax(-1).topk(2, dim=-1).values[0]
                gaps.append(float((top[:, 0] - top[:, 1]).min()))
    return min(gaps)


@pytest.fixture(scope="session")
def greedy_margin():
    """``greedy_margin(model, batches)``: how far the eager model's closest greedy choice is from
    a tie; a test comparing tokens exactly across kernels asserts it is far wider than their
    float32 rounding (~1e-6 on every ISA)."""
    return _greedy_margin


@pytest.fixture(scope="session")
def compiled_translate_run(tmp_path_factory):
    """A tiny Transformer translate run and a user cache holding its compiled decoding, built
    once for the session by ``attnkit translate compile``: ``(run, cache)``."""
    from attnkit.cli.main import main

    folder = tmp_path_factory.mktemp("compiled")
    write_number_pairs(folder / "pairs.tsv", n=300, seed=0, words=8, max_words=5)
    before = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNKIT_CACHE", str(folder / "cache"))
        assert main(["translate", "train", "--data", str(folder / "pairs.tsv"), "--out",
                     str(folder / "run"), "--epochs", "4", "--max-minutes", "0", "--arch",
                     "transformer", "--d-model", "32", "--heads", "2", "--layers", "2",
                     "--ff-dim", "48", "--batch-size", "16", "--lr", "3e-3", "--no-progress",
                     "--examples", "0", "--threads", "1"]) == 0
        assert main(["translate", "compile", str(folder / "run"), "--threads", "1"]) == 0
    torch.set_num_threads(before)
    return folder / "run", folder / "cache"
