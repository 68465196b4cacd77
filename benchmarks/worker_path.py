"""The Spark worker's join function alone: ``enrich_batches`` (what ``mapInArrow`` runs in
each task) over 400,000 rows in batches of 10,000, against scripted in-memory stores
(:class:`enrich.testing.FakeSource`, answering at once), so that only the worker's own
path is timed: cutting chunks, the engine, building the output batches. No Spark, no
network: a change to the worker's plumbing shows here first.

Paths: the columnar lane (``ColumnarFakeSource``, the defaults) and the per-row engine
(``FakeSource``, capacity 2,000). Best of 3 runs each. To compare two commits, run it in
each checkout in turn, alternating (the spread between runs is ~20% on this machine).
Rerun: ``python -m benchmarks worker_path``.
"""

from __future__ import annotations

import time

import pyarrow as pa

from enrich.lookup.join_settings import JoinSettings
from enrich.spark.join.join_batches import JoinPlan, enrich_batches
from enrich.testing import ColumnarFakeSource, FakeSource

from ._report import table, write

ROWS = 400_000
BATCH = 10_000
SCHEMA = "name string, credit double"


def rates() -> dict[str, float]:
    """Rows a second of each path, best of 3."""
    data = {i: (f"user-{i}", float(i)) for i in range(100_000)}
    keys = [(i * 7919) % 120_000 for i in range(ROWS)]  # a sixth of them miss
    batches = [
        pa.RecordBatch.from_pydict({"k": keys[s : s + BATCH], "n": list(range(s, s + BATCH))})
        for s in range(0, ROWS, BATCH)
    ]
    paths = {
        "columnar lane, defaults": (ColumnarFakeSource(data, schema=SCHEMA), JoinSettings()),
        "per-row engine, capacity 2000": (
            FakeSource(data, schema=SCHEMA),
            JoinSettings(capacity=2000),
        ),
    }
    found: dict[str, float] = {}
    for name, (source, settings) in paths.items():
        plan = JoinPlan("worker_path", source, (0,), ("name", "credit"), settings)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            rows = sum(b.num_rows for b in enrich_batches(plan, iter(batches)))
            best = min(best, time.perf_counter() - started)
            assert rows == ROWS, rows  # a left join: every row out
        found[name] = ROWS / best
    return found


def main() -> None:
    found = rates()
    text = table(["path", "rows/s (best of 3)"], [(k, f"{v:,.0f}") for k, v in found.items()])
    print(text)
    write("worker_path", "The Spark worker's join function alone", [("", text)], __doc__ or "")


if __name__ == "__main__":
    main()
