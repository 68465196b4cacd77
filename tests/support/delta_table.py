"""What a Delta table holds, read from its transaction log without Spark: the crash
runs and tests count rows per key from another process, while a job writes it (or after
it was killed), as a reader of the table would see it.

A table's state is its ``_delta_log``: one JSON file per version (``00000000000000000003.json``),
each line an action. ``add`` names a data file (with ``stats.numRecords``), ``remove``
takes one out, ``txn`` records a streaming query's last committed batch (``appId`` =
the query's id, ``version`` = the batch id). Delta writes a version's file in one
put-if-absent (a rename on the local file system), so a version file present is a
committed version; data files a killed batch left with no version naming them are not
part of the table. An append-only streaming sink writes no checkpoint Parquet in the
runs here (Delta checkpoints every 10 versions: read too, when present).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any


def _versions(table: Path) -> list[Path]:
    log = table / "_delta_log"
    if not log.exists():
        return []
    return sorted(p for p in log.glob("*.json") if p.stem.isdigit())


def actions(table: Path) -> list[dict[str, Any]]:
    """Every action of every committed version, in version order (those before the
    last checkpoint read from its Parquet)."""
    found: list[dict[str, Any]] = []
    log = table / "_delta_log"
    checkpoints = sorted(log.glob("*.checkpoint.parquet")) if log.exists() else []
    after = -1
    if checkpoints:
        import pyarrow.parquet as pq

        last = checkpoints[-1]
        after = int(last.name.split(".")[0])
        for row in pq.read_table(last).to_pylist():
            found += [{k: v} for k, v in row.items() if v is not None]
    for version in _versions(table):
        if int(version.stem) <= after:
            continue
        try:
            text = version.read_text()
        except FileNotFoundError:  # a log cleanup meanwhile
            continue
        found += [json.loads(line) for line in text.splitlines() if line.strip()]
    return found


def live_files(table: Path) -> list[dict[str, Any]]:
    """The ``add`` actions of the data files the table's last version holds."""
    files: dict[str, dict[str, Any]] = {}
    for action in actions(table):
        if "add" in action:
            files[action["add"]["path"]] = action["add"]
        elif "remove" in action:
            files.pop(action["remove"]["path"], None)
    return list(files.values())


def row_count(table: Path) -> int:
    """Rows in the table (from each file's statistics: no data file is read)."""
    total = 0
    for add in live_files(table):
        stats = add.get("stats")
        if isinstance(stats, str):
            total += int(json.loads(stats).get("numRecords", 0))
    return total


def column_counts(table: Path, column: str) -> Counter[Any]:
    """How many rows of the table hold each value of ``column`` (its data files read
    with pyarrow)."""
    import pyarrow.parquet as pq

    counts: Counter[Any] = Counter()
    for add in live_files(table):
        path = table / add["path"]
        counts.update(pq.read_table(path, columns=[column]).column(column).to_pylist())
    return counts


def committed_batch(table: Path) -> int:
    """The last batch id a streaming query committed into the table (-1: none)."""
    versions = [a["txn"]["version"] for a in actions(table) if "txn" in a]
    return max(versions, default=-1)
