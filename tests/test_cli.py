"""`enrich demo` runs end to end on embedded services (without its Spark part here)."""

from __future__ import annotations

import pytest

from enrich import cli


@pytest.mark.timeout(120)
def test_the_demo_runs_on_embedded_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--records", "2000", "--no-spark"]) == 0
    out = capsys.readouterr().out
    assert "ordered_wait, capacity 100" in out
    assert "Little law bound" in out
    # The chained Redis -> HTTP join enriched order 1001 from both stores.
    assert "'order_id': 1001, 'user_id': 1, 'amount': 25.0, 'name': 'user-1'" in out
    assert "'credit': 0.5" in out
