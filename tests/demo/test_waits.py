"""A step of the demo that blocks says what it waits for, while it waits."""

from __future__ import annotations

import re
import threading

import pytest

from enrich.demo.streaming.waits import waiting


def test_a_wait_is_announced_reminded_and_timed() -> None:
    said: list[str] = []
    reminded = threading.Event()

    def say(line: str) -> None:
        said.append(line)
        if "still" in line:
            reminded.set()

    with waiting("Spark to start", "Spark started", every=0.01, say=say):
        assert said == ["   waiting for Spark to start ..."]
        assert reminded.wait(30)  # the block blocks; the reminder comes anyway
    assert re.fullmatch(r"   still waiting for Spark to start \(\d+ s\)", said[1])
    assert re.fullmatch(r"   Spark started \(\d+ s\)", said[-1])


def test_a_failed_wait_is_not_called_done() -> None:
    said: list[str] = []
    with pytest.raises(RuntimeError), waiting("x", "x done", say=said.append):
        raise RuntimeError("no gateway")
    assert said == ["   waiting for x ..."]
