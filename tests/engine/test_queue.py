"""The result queues, step by step (the model: Flink's queue tests)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from enrich.engine.mailbox.queue import Entry, OrderedQueue, UnorderedQueue
from enrich.engine.model import Watermark


def put(queue: OrderedQueue | UnorderedQueue, *values: object) -> list[Entry]:
    entries = []
    for value in values:
        entry = Entry(value)
        if isinstance(value, Watermark):
            entry.outputs = [value]
            ready: list[Entry] = []
            queue.put_watermark(entry, ready)
            assert ready == [], "a watermark behind pending records must wait"
        else:
            queue.put(entry)
        entries.append(entry)
    return entries


def finish(queue: OrderedQueue | UnorderedQueue, entry: Entry) -> list[object]:
    entry.done = True
    ready: list[Entry] = []
    queue.completed(entry, ready)
    return [e.value for e in ready]


def test_ordered_queue_emits_only_a_completed_head_and_what_follows_it() -> None:
    queue = OrderedQueue()
    a, b, c = put(queue, "a", "b", "c")
    assert finish(queue, c) == []
    assert finish(queue, b) == []
    assert len(queue) == 3
    assert finish(queue, a) == ["a", "b", "c"]
    assert len(queue) == 0


def test_ordered_queue_passes_a_watermark_in_place() -> None:
    queue = OrderedQueue()
    a, _wm, b = put(queue, "a", Watermark(1), "b")
    assert finish(queue, b) == []
    assert finish(queue, a) == ["a", Watermark(1), "b"]


def test_watermark_on_an_empty_queue_leaves_at_once() -> None:
    for queue in (OrderedQueue(), UnorderedQueue()):
        entry = Entry(Watermark(7))
        ready: list[Entry] = []
        queue.put_watermark(entry, ready)
        assert [e.value for e in ready] == [Watermark(7)]
        assert len(queue) == 0


def test_unordered_queue_emits_as_completed_within_a_segment() -> None:
    queue = UnorderedQueue()
    a, b, c = put(queue, "a", "b", "c")
    assert finish(queue, c) == ["c"]
    assert finish(queue, a) == ["a"]
    assert len(queue) == 1
    assert finish(queue, b) == ["b"]
    assert len(queue) == 0


def test_unordered_queue_never_crosses_a_watermark() -> None:
    queue = UnorderedQueue()
    a, b, _wm, c, d = put(queue, "a", "b", Watermark(10), "c", "d")
    # Records after the watermark wait, even when done first.
    assert finish(queue, d) == []
    assert finish(queue, c) == []
    assert finish(queue, b) == ["b"]
    assert len(queue) == 4
    # The last record before the watermark releases it, then what waited behind it.
    assert finish(queue, a) == ["a", Watermark(10), "d", "c"]
    assert len(queue) == 0
    # The queue goes on working after its segments were recycled.
    (e,) = put(queue, "e")
    assert finish(queue, e) == ["e"]


def test_unordered_queue_with_consecutive_watermarks() -> None:
    queue = UnorderedQueue()
    a, _w1, _w2, b = put(queue, "a", Watermark(1), Watermark(2), "b")
    assert finish(queue, b) == []
    assert finish(queue, a) == ["a", Watermark(1), Watermark(2), "b"]


@given(
    st.lists(st.one_of(st.integers(0, 10_000), st.just(None)), min_size=1, max_size=60),
    st.randoms(use_true_random=False),
)
def test_random_completion_orders_keep_the_promises(items: list[int | None], rng) -> None:
    """Property: ORDERED emits everything in order; UNORDERED emits every record exactly
    once, and nothing crosses a watermark either way."""
    values = [Watermark(i) if v is None else (i, v) for i, v in enumerate(items)]
    for queue in (OrderedQueue(), UnorderedQueue()):
        emitted: list[object] = []
        entries = []
        for value in values:
            entry = Entry(value)
            if isinstance(value, Watermark):
                entry.outputs = [value]
                ready: list[Entry] = []
                queue.put_watermark(entry, ready)
                emitted += [e.value for e in ready]
            else:
                queue.put(entry)
                entries.append(entry)
        rng.shuffle(entries)
        for entry in entries:
            emitted += finish(queue, entry)
        assert sorted(map(repr, emitted)) == sorted(map(repr, values))
        assert len(queue) == 0
        if isinstance(queue, OrderedQueue):
            assert emitted == values
        # No record crosses a watermark: its position relative to every watermark holds.
        marks = [i for i, v in enumerate(values) if isinstance(v, Watermark)]
        position = {repr(v): i for i, v in enumerate(emitted)}
        for m in marks:
            for i, v in enumerate(values):
                before = position[repr(v)] < position[repr(values[m])]
                assert before == (i < m) or i == m


def test_unordered_queue_holds_early_outputs_behind_a_watermark() -> None:
    queue = UnorderedQueue()
    first, mark, second = put(queue, "a", Watermark(1), "b")
    ready: list[object] = []
    queue.released(second, "part of b", ready)
    assert ready == []  # "b" is behind the watermark: so is its early part
    queue.released(first, "part of a", ready)
    assert ready == ["part of a"]  # nothing is ahead of "a"
    assert len(queue) == 3  # early parts are no elements
    ready = []
    first.done = True
    queue.completed(first, ready)
    assert [getattr(e, "value", e) for e in ready] == ["a", mark.value, "part of b"]


def test_ordered_queue_refuses_early_outputs() -> None:
    queue = OrderedQueue()
    (entry,) = put(queue, "a")
    try:
        queue.released(entry, "part", [])
    except RuntimeError as exc:
        assert "UNORDERED" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("released() must refuse under ORDERED")
