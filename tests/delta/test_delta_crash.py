"""kafka -> lookup_join -> delta survives machine crashes (SIGKILL of the job's process
group and of Spark's Python daemons' groups at once) and restarts whose batches are cut
otherwise: the table holds each order once. A soak scenario (every restart starts a
driver: minutes); ``python -m tests.exactly_once.delta_crash`` runs more."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exactly_once.delta_crash import one_run

pytestmark = [
    pytest.mark.delta,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.soak,
    pytest.mark.timeout(1800),
]


def test_kafka_to_delta_survives_machine_crashes(tmp_path: Path, delta_available: object) -> None:
    outcome = one_run(tmp_path, seed=70, kills=2, orders=200)
    assert outcome.kills >= 1
    assert (outcome.lost, outcome.doubled, outcome.rows) == (0, 0, 200)
