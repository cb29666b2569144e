"""Continuous batching (`Batcher`, over `Gatherer`), with a stand-in model: what is gathered,
what is kept apart, what is never run, and that nothing waits for a free model."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("prometheus_client", reason="the serve extra is missing")
pytest.importorskip("fastapi", reason="the serve extra is missing")

from attnkit.errors import UsageError  # noqa: E402
from attnkit.server.batching import Batcher, ModelThread  # noqa: E402
from attnkit.server.errors import ApiError  # noqa: E402
from attnkit.server.options import ServeOptions  # noqa: E402
from attnkit.server.prometheus import Metrics  # noqa: E402


class Model:
    """Upper-cases its inputs; records every call; refuses ``"bad"``; may be held, or take
    ``delay`` seconds a call."""

    def __init__(self):
        self.calls, self.called = [], []
        self.hold = threading.Event()
        self.hold.set()
        self.delay = 0.0

    def __call__(self, inputs, **options):
        self.called.append(time.monotonic())
        self.hold.wait(5)
        time.sleep(self.delay)
        self.calls.append((list(inputs), dict(options)))
        if "bad" in inputs:
            raise UsageError("bad input")
        return [x.upper() for x in inputs]


def run(coro_fn, **settings):
    """Run ``coro_fn(batcher, model)`` with a started batcher."""
    async def main():
        model, thread = Model(), ModelThread()
        options = {"max_batch": 8, "max_wait_s": 0.05, "max_queue": 100, **settings}
        batcher = Batcher("m", model, thread, metrics=Metrics(), **options)
        batcher.start()
        try:
            return await coro_fn(batcher, model)
        finally:
            await batcher.stop()
            thread.shutdown()
    return asyncio.run(main())


def test_concurrent_requests_are_one_call_each_answered_its_own():
    async def go(b, model):
        out = await asyncio.gather(*(b.submit([f"t{i}", f"u{i}"], {}, 5) for i in range(3)))
        return out, model.calls
    out, calls = run(go)
    assert out == [[f"T{i}", f"U{i}"] for i in range(3)]
    assert len(calls) == 1 and len(calls[0][0]) == 6


def test_max_batch_never_splits_a_request_and_keeps_arrival_order():
    async def go(b, model):
        await asyncio.gather(*(b.submit([str(i)] * 3, {}, 5) for i in range(4)))
        return model.calls
    calls = run(go, max_batch=7)
    assert [c[0] for c in calls] == [["0"] * 3 + ["1"] * 3, ["2"] * 3 + ["3"] * 3]


def test_a_request_larger_than_a_batch_is_cut_into_calls_and_answered_whole():
    async def go(b, model):
        return await b.submit(list("abcdefghij"), {}, 5), model.calls
    out, calls = run(go, max_batch=4)
    assert out == list("ABCDEFGHIJ")
    assert [c[0] for c in calls] == [list("abcd"), list("efgh"), list("ij")]


def test_work_bounds_a_call_and_its_first_input_always_goes():
    async def go(b, model):
        return (await b.submit(list("abcde"), {}, 5, work=[4, 4, 30, 1, 1]),
                [c[0] for c in model.calls])
    out, calls = run(go, max_work=10)
    assert out == list("ABCDE") and calls == [["a", "b"], ["c"], ["d", "e"]]


def test_a_large_request_takes_turns_with_the_others():
    """Issue #47 (3): one client's large request held the model for all its work while every
    other client waited. A request that came meanwhile now runs before its next call."""
    async def go(b, model):
        model.hold.clear()
        large = asyncio.ensure_future(b.submit([f"l{i}" for i in range(6)], {}, 5))
        await asyncio.sleep(0.1)                      # its first call is running
        small = [asyncio.ensure_future(b.submit([x], {}, 5)) for x in "stu"]
        await asyncio.sleep(0.05)
        model.hold.set()
        await asyncio.gather(large, *small)
        return [c[0] for c in model.calls]
    calls = run(go, max_batch=2, max_wait_s=0)
    assert calls == [["l0", "l1"], ["s", "t"], ["u"], ["l2", "l3"], ["l4", "l5"]]


def test_a_request_past_its_deadline_is_dropped_from_the_model():
    """Issue #47 (3): a request answered 503 at its deadline kept the model working on it.
    What of it has not run when the deadline passes never runs."""
    async def go(b, model):
        model.delay = 0.05
        with pytest.raises(ApiError) as late:
            await b.submit([str(i) for i in range(40)], {}, 0.2)
        at_deadline = len(model.called)
        await asyncio.sleep(0.3)
        return late.value, at_deadline, len(model.calls), b.depth
    late, at_deadline, calls, depth = run(go, max_batch=1, max_wait_s=0)
    assert late.status_code == 503 and late.code == "deadline"
    assert at_deadline < 10 and calls == at_deadline    # the call running then, and no more
    assert depth == 0


def test_different_options_never_share_a_call():
    async def go(b, model):
        await asyncio.gather(b.submit(["a"], {"beam": 1}, 5), b.submit(["b"], {"beam": 5}, 5),
                             b.submit(["c"], {"beam": 1}, 5))
        return model.calls
    calls = run(go)
    assert sorted((c[0], c[1]["beam"]) for c in calls) == [(["a", "c"], 1), (["b"], 5)]


def test_batching_off_runs_every_request_alone():
    async def go(b, model):
        await asyncio.gather(*(b.submit([str(i)], {}, 5) for i in range(5)))
        return model.calls
    assert len(run(go, max_batch=1, max_wait_s=0)) == 5


def test_a_bad_input_fails_its_own_request_only():
    async def go(b, model):
        return await asyncio.gather(b.submit(["a"], {}, 5), b.submit(["bad"], {}, 5),
                                    b.submit(["c"], {}, 5), return_exceptions=True)
    a, bad, c = run(go)
    assert a == ["A"] and c == ["C"] and isinstance(bad, UsageError)


def test_a_lone_request_is_decoded_at_once():
    """The server's default holds no request: the model is called in the same turn of the
    event loop (a fixed wait would show as its length here)."""
    async def go(b, model):
        submitted = time.monotonic()
        await b.submit(["a"], {}, 5)
        return model.called[0] - submitted
    waited = run(go, max_wait_s=ServeOptions().max_wait_ms / 1000)
    assert waited < 0.05, waited   # generous for a loaded machine: the old default was 5 ms


def test_requests_gather_while_the_model_is_busy_and_go_when_it_frees():
    async def go(b, model):
        model.hold.clear()                   # the model is busy with "first"
        first = asyncio.ensure_future(b.submit(["first"], {}, 5))
        await asyncio.sleep(0.1)
        later = [asyncio.ensure_future(b.submit([x], {}, 5)) for x in "abcdefghij"]
        await asyncio.sleep(0.1)
        model.hold.set()
        await asyncio.gather(first, *later)
        return model.calls
    calls = run(go, max_batch=8, max_wait_s=0)
    # All that came while it was busy went next, as one batch capped by max_batch.
    assert [c[0] for c in calls] == [["first"], list("abcdefgh"), ["i", "j"]]


def test_clients_answered_together_come_back_together():
    """Clients that ask again as soon as they are answered: those the last call answered get
    a moment to return, so they join the requests that queued meanwhile. Without it, the
    calls would alternate between the groups: 1, 7, 1, 7, 1, 7."""
    async def client(b, name, start):
        await asyncio.sleep(start)
        for turn in range(3):
            await b.submit([f"{name}{turn}"], {}, 5)

    async def go(b, model):
        model.delay = 0.2   # a quarter of it (50 ms) is the most the next call waits
        # c0 first, alone; the seven others while its first call runs.
        await asyncio.gather(*(client(b, f"c{i}", 0.05 * (i > 0)) for i in range(8)))
        return model.calls
    calls = run(go, max_batch=8, max_wait_s=0)
    assert [len(c[0]) for c in calls] == [1, 8, 8, 7]


def test_a_lone_client_asking_again_is_decoded_at_once():
    """The one return expected after a call answering one request is that request's client
    itself: its next request runs at once, however long the last call took."""
    async def go(b, model):
        model.delay = 0.4   # the next call could wait up to 100 ms for company
        waited = []
        for turn in range(3):
            submitted = time.monotonic()
            await b.submit([str(turn)], {}, 5)
            waited.append(model.called[turn] - submitted)
        return waited
    waited = run(go, max_wait_s=0)
    assert max(waited) < 0.05, waited


def test_a_run_gathers_while_another_run_holds_the_model_thread():
    """Two runs share the one model thread: a batch is taken when the thread is free, not
    queued behind another run's call with only what had come by then."""
    async def main():
        thread, busy, idle = ModelThread(), Model(), Model()
        settings = {"max_batch": 8, "max_wait_s": 0, "max_queue": 100, "metrics": Metrics()}
        a, b = Batcher("a", busy, thread, **settings), Batcher("b", idle, thread, **settings)
        a.start(), b.start()
        try:
            busy.hold.clear()
            running = asyncio.ensure_future(a.submit(["x"], {}, 5))
            await asyncio.sleep(0.1)
            waiting = [asyncio.ensure_future(b.submit([t], {}, 5)) for t in ("p", "q")]
            await asyncio.sleep(0.05)
            waiting.append(asyncio.ensure_future(b.submit(["r"], {}, 5)))
            await asyncio.sleep(0.05)
            busy.hold.set()
            await asyncio.gather(running, *waiting)
            return idle.calls
        finally:
            await a.stop(), await b.stop()
            thread.shutdown()
    assert [c[0] for c in asyncio.run(main())] == [["p", "q", "r"]]


def test_a_request_past_its_deadline_is_not_waited_for():
    """y's deadline passes while its batch runs (it gets its 503 then): the next batch waits
    only for x, the one client that batch answered."""
    async def go(b, model):
        model.delay = 0.4   # the next batch could wait up to 100 ms
        x = asyncio.ensure_future(b.submit(["x"], {}, 5))
        y = asyncio.ensure_future(b.submit(["y"], {}, 0.2))
        await x
        asked = time.monotonic()
        await b.submit(["x2"], {}, 5)
        with pytest.raises(ApiError):
            await y
        return model.called[1] - asked
    waited = run(go, max_wait_s=0)
    assert waited < 0.05, waited


def test_a_run_waiting_for_its_clients_leaves_the_thread_to_another_run():
    """Run a's next batch waits for the second of the two clients it answered; meanwhile run
    b's request takes the free thread at once."""
    async def main():
        thread, slow, other = ModelThread(), Model(), Model()
        slow.delay = 0.4   # run a's next batch may wait 100 ms for its clients
        settings = {"max_batch": 8, "max_wait_s": 0, "max_queue": 100, "metrics": Metrics()}
        a, b = Batcher("a", slow, thread, **settings), Batcher("b", other, thread, **settings)
        a.start(), b.start()
        try:
            await asyncio.gather(a.submit(["x"], {}, 5), a.submit(["y"], {}, 5))
            again = asyncio.ensure_future(a.submit(["x2"], {}, 5))   # only one comes back
            await asyncio.sleep(0.01)
            asked = time.monotonic()
            await b.submit(["p"], {}, 5)
            await again
            return other.called[0] - asked, [c[0] for c in slow.calls]
        finally:
            await a.stop(), await b.stop()
            thread.shutdown()
    waited, calls = asyncio.run(main())
    assert calls == [["x", "y"], ["x2"]]
    assert waited < 0.05, waited


def test_full_queue_and_deadline_and_abandoned_requests_cost_nothing():
    async def go(b, model):
        model.hold.clear()                   # the model is busy
        first = asyncio.ensure_future(b.submit(["first"], {}, 5))
        await asyncio.sleep(0.2)             # ... running "first"
        late = asyncio.ensure_future(b.submit(["late"], {}, 0.1))
        await asyncio.sleep(0.01)            # ... "late" queued
        with pytest.raises(ApiError) as full:
            await b.submit(["over"], {}, 5)
        with pytest.raises(ApiError) as deadline:
            await late
        model.hold.set()
        await first
        await asyncio.sleep(0.2)
        return full.value, deadline.value, model.calls, b.depth
    full, deadline, calls, depth = run(go, max_queue=2)
    assert full.status_code == 429 and full.headers["Retry-After"] == "1"
    assert deadline.status_code == 503 and deadline.code == "deadline"
    assert [c[0] for c in calls] == [["first"]]     # "late" was dropped before it ran
    assert depth == 0


def test_stop_answers_waiting_requests_503():
    async def go(b, model):
        model.hold.clear()
        first = asyncio.ensure_future(b.submit(["first"], {}, 5))
        await asyncio.sleep(0.1)
        waiting = asyncio.ensure_future(b.submit(["second"], {}, 5))
        await asyncio.sleep(0.1)
        stop = asyncio.ensure_future(b.stop())
        await asyncio.sleep(0.1)
        model.hold.set()
        await stop
        return await asyncio.gather(first, waiting, return_exceptions=True)
    first, waiting = run(go)
    assert first == ["FIRST"]                  # the batch running was answered
    assert isinstance(waiting, ApiError) and waiting.status_code == 503
