"""``fewer_collections`` (enrich/engine/runtime.py): the collector's youngest generation
collects less often while runs call, and its thresholds come back after the last."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from enrich.engine.runtime import YOUNG_THRESHOLD, fewer_collections


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_the_young_threshold_is_raised_within_and_restored_after() -> None:
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_runs_restore_after_the_last_one() -> None:
    first = fewer_collections()
    first.__enter__()
    with fewer_collections():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the first run is still on
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_threshold_set_meanwhile_stays() -> None:
    with fewer_collections():
        gc.set_threshold(2000, 5, 5)
    assert gc.get_threshold() == (2000, 5, 5)


@pytest.mark.parametrize("young", [0, YOUNG_THRESHOLD * 2])
def test_a_higher_threshold_or_a_disabled_one_is_left_alone(young: int) -> None:
    gc.set_threshold(young, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (young, 10, 10)
    assert gc.get_threshold() == (young, 10, 10)


def test_the_thresholds_are_restored_when_the_run_raises() -> None:
    with pytest.raises(ZeroDivisionError), fewer_collections():
        1 / 0  # noqa: B018 - the run's own error
    assert gc.get_threshold() == (700, 10, 10)


CHILD = """
import gc, os
from enrich.engine.runtime import fewer_collections
gc.set_threshold(700, 10, 10)
with fewer_collections():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, repr(gc.get_threshold()).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    print(os.read(read, 100).decode())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_run_gets_the_thresholds_back() -> None:
    # In a fresh interpreter: forking this test process (it has threads) is not safe.
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "(700, 10, 10)"
