"""The consumer's non-blocking core, step by step: what both iterators are built on."""

from __future__ import annotations

import pytest

from enrich.engine.caller.consumer import Consumer


def test_admits_while_credit_lasts_and_waits_without_it() -> None:
    consumer = Consumer(4, None)
    source = iter(range(10))
    assert consumer.pull(source) == [0, 1, 2, 3]
    assert consumer.must_wait() and consumer.pull(source) == []
    consumer.receive(("emit", ["a", "b"], 2))  # two units come back
    assert not consumer.must_wait()
    assert consumer.pull(source) == [4, 5]
    assert consumer.next_outputs() == ["a", "b"]
    assert consumer.next_outputs() is None


def test_a_consumer_on_another_thread_admits_half_the_capacity_at_a_time() -> None:
    consumer = Consumer(10, None, overlap=True)
    source = iter(range(30))
    assert consumer.pull(source) == [0, 1, 2, 3, 4]
    assert consumer.pull(source) == [5, 6, 7, 8, 9]  # the next chunk, before any output
    assert consumer.must_wait()


def test_a_record_heavier_than_the_capacity_is_admitted_alone() -> None:
    consumer = Consumer(2, len)
    source = iter(["aaaa", "b"])
    assert consumer.pull(source) == ["aaaa"]  # nothing in flight: it may not stall
    assert consumer.must_wait()
    consumer.receive(("emit", ["x"], 4))
    assert consumer.pull(source) == ["b"]


def test_a_held_input_is_admitted_first_once_credit_returns() -> None:
    consumer = Consumer(4, len)
    source = iter(["aaa", "bb", "c"])
    assert consumer.pull(source) == ["aaa"]  # "bb" does not fit in the one unit left
    assert consumer.must_wait() and not consumer.wants_input()
    consumer.receive(("emit", ["x"], 3))
    assert consumer.pull(source) == ["bb", "c"]
    assert consumer.pull(source) == [] and consumer.exhausted
    assert consumer.finish_now() and not consumer.finish_now()  # told once


def test_async_inputs_are_offered_one_by_one() -> None:
    consumer = Consumer(3, len)
    assert consumer.offer("ab") == ["ab"]
    assert consumer.offer("cd") == []  # held: one unit left
    assert consumer.retake() == []
    consumer.receive(("emit", [], 2))
    assert consumer.retake() == ["cd"]
    consumer.end_input()
    assert consumer.finish_now()


def test_the_error_comes_after_every_output_before_it() -> None:
    consumer = Consumer(2, None)
    consumer.receive(("emit", [1], 1))
    consumer.receive(("emit", [2], 1))
    consumer.receive(("fail", KeyError("k")))
    assert consumer.ended and not consumer.is_over()
    assert consumer.next_outputs() == [1]
    assert consumer.next_outputs() == [2]
    with pytest.raises(KeyError):
        consumer.next_outputs()
    assert consumer.is_over()


def test_done_ends_the_run_after_its_outputs() -> None:
    consumer = Consumer(2, None)
    consumer.receive(("emit", [1], 1))
    consumer.receive(("done",))
    assert not consumer.is_over()
    assert consumer.next_outputs() == [1]
    assert consumer.next_outputs() is None and consumer.is_over()
