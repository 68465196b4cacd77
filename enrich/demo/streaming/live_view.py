"""The live view of the demo's streaming query: observe it, show what it does.

Every :data:`REFRESH` seconds the driver reads the query's progress and status, the
Spark tasks running and the rows the users join has taken in (its metrics), hands them
to a :class:`~enrich.demo.streaming.stream_watch.StreamWatch`, and shows the watch's live line: a
table (``rich``, when installed and the output is a terminal) or one plain line every
:data:`PLAIN_EVERY` seconds, and the last state once the watch is over.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from .stream_watch import Batch, Observation, StreamWatch, live_fields

REFRESH = 0.5  # seconds between two looks at the query
PLAIN_EVERY = 2.0  # seconds between plain progress lines


def batches_of(progress: Any) -> tuple[Batch, ...]:
    """The query's progress entries (``recentProgress``) as the micro-batches that ended."""
    ended = []
    for entry in progress:
        rate = float(entry.get("processedRowsPerSecond") or 0.0)
        ended.append(
            Batch(
                batch_id=int(entry["batchId"]),
                rows=int(entry.get("numInputRows") or 0),
                rows_per_second=0.0 if math.isnan(rate) else rate,
            )
        )
    return tuple(ended)


def _observe(query: Any, tracker: Any, at: float) -> Observation:
    from enrich.spark import statistics

    tasks = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        tasks += info.numActiveTasks if info is not None else 0
    return Observation(
        at=at,
        batches=batches_of(query.recentProgress),
        running=bool(query.status.get("isTriggerActive", False)),
        tasks=tasks,
        worker_rows=statistics("users").rows_in,
    )


def _fields(watch: StreamWatch) -> dict[str, str]:
    from enrich.spark import statistics

    return live_fields(watch, statistics("users"), statistics("credit"))


def _line(watch: StreamWatch) -> str:
    return "   " + "  ".join(f"{k} {v}" for k, v in _fields(watch).items())


def watch_live(spark: Any, query: Any, watch: StreamWatch) -> None:
    """Show ``query`` live until it has shown rows for the watch's duration, the watch
    gives up waiting for its first rows, or the query ends (stopped or failed)."""
    tracker = spark.sparkContext.statusTracker()
    started = time.monotonic()

    def look() -> bool:  # whether to go on
        watch.see(_observe(query, tracker, time.monotonic() - started))
        return not (watch.is_done() or watch.has_given_up()) and bool(query.isActive)

    try:
        from rich.live import Live
        from rich.table import Table

        fancy = sys.stdout.isatty()
    except ImportError:  # rich is optional: plain lines instead
        fancy = False
    if not fancy:
        next_line = started
        while look():
            if time.monotonic() >= next_line:
                print(_line(watch), flush=True)
                next_line += PLAIN_EVERY
            time.sleep(REFRESH)
        print(_line(watch), flush=True)
        return

    def table() -> Any:
        shown = Table(title="live: users / credit (HTTP)", show_header=False)
        shown.add_column("what", style="bold")
        shown.add_column("value", justify="right")
        for key, value in _fields(watch).items():
            shown.add_row(key, value)
        return shown

    with Live(table(), refresh_per_second=4, transient=False) as live:
        while look():
            time.sleep(REFRESH)
            live.update(table())
        live.update(table())
