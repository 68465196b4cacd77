"""A toy sink written only from docs/writing-a-sink.md: it appends each row to a file,
exactly once keyed by the source record.

Format ``append-file``, option ``path`` (a folder). Each source partition has one file
there, ``<partition>.jsonl`` (the partition's name with ``/`` as ``~``), of JSON lines:
the rows (``{"row": {...}}``), each commit closed by its mark line (``{"mark": "<id>"}``).
A commit is one appended write of the partition's new rows and its new mark, under an
exclusive lock; whatever follows the last mark line (a write torn by a crash) was never
committed and is cut off before the next one, so a file's mark is its last mark line and
the rows before it are exactly what was committed.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from enrich.spark.sink import sink_spi as spi
from enrich.spark.sink.joined import JoinableSink, run_stage

log = logging.getLogger("tests.spark.file_sink")

NAME = "append-file"


class FileSink(JoinableSink):
    """``writeStream.format("append-file").option("path", folder)``, keyed by the source
    record (``sourceIdColumn``, ``sourceStreamColumn``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.target = str(options.get("path", "")).strip()
        if not self.target:
            raise ValueError('the append-file sink needs .option("path", folder)')
        self.named = spi.source_fields(options)
        if self.named is None:
            raise ValueError(
                f"the append-file sink writes each source record once: set "
                f'.option("{spi.ID_OPTION}", ...) (the redis-stream source\'s stream_id)'
            )

    def writer(self, schema: Any, overwrite: bool) -> Any:
        raise ValueError("the append-file sink is keyed by the source record: streaming only")

    def streamWriter(self, schema: Any, overwrite: bool) -> FileWriter:
        schema = self.joined_schema(schema)
        fields = {f.name: f.dataType.simpleString() for f in schema.fields}
        columns = spi.resolve(self.named, fields, sink=self.name())
        return FileWriter(self.target, columns, self.joined_function())


@dataclass
class Appended(WriterCommitMessage):
    rows: int
    skipped: int
    partitions: list[str]


class FileWriter(DataSourceStreamArrowWriter):
    def __init__(self, target: str, columns: spi.SourceColumns, stage: Any) -> None:
        self.target, self.columns, self.stage = target, columns, stage

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Appended:
        written = skipped = 0
        seen: set[str] = set()
        for batch in run_stage(self.stage, iterator):
            for partition, rows in spi.split(batch, self.columns, sink=NAME).items():
                seen.add(partition)
                with _locked(self.target, partition) as handle:
                    mark = _mark(handle)
                    new, top = spi.unwritten(rows, self.columns, mark)
                    skipped += rows.num_rows - new.num_rows
                    if top is not None:
                        _append(handle, new, top)
                        written += new.num_rows
        return Appended(written, skipped, sorted(seen))

    def commit(self, messages: list[Any], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, Appended)]
        held = [p for m in done for p in m.partitions]
        split = sorted({p for p in held if held.count(p) > 1})
        if split:  # the contract's one partition, one task: a task's rows were skipped
            raise spi.SourceNotKeyed(
                f"append-file sink: batch {batchId}: source partition(s) {split} were "
                "written by several tasks (read each in one task: redis-stream's "
                "partitionsPerStream=1, no shuffle before the sink)"
            )
        log.info(
            "append-file sink %s: batch %s: %d rows appended, %d skipped as written",
            self.target,
            batchId,
            sum(m.rows for m in done),
            sum(m.skipped for m in done),
        )

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass  # what a task committed stays; its replay skips it by the marks


def partition_file(folder: str | Path, partition: str) -> Path:
    return Path(folder) / f"{partition.replace('/', '~')}.jsonl"


def committed_rows(folder: str | Path, partition: str) -> list[dict[str, Any]]:
    """The rows committed to ``partition``'s file, in order (a reader's view)."""
    path = partition_file(folder, partition)
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if "mark" in item:
            rows += pending
            pending = []
        else:
            pending.append(item["row"])
    return rows


class _locked:
    """The partition's file, opened for reading and appending, locked exclusively."""

    def __init__(self, folder: str, partition: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = partition_file(folder, partition)

    def __enter__(self) -> Any:
        self.handle = open(self.path, "a+b")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self.handle

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _mark(handle: Any) -> spi.Mark | None:
    """The file's last mark; cuts off what follows it (a torn, uncommitted write)."""
    handle.seek(0)
    mark, end, offset = None, 0, 0
    for line in handle:
        offset += len(line)
        if line.endswith(b"\n") and b'"mark"' in line:
            mark, end = spi.parse_mark(json.loads(line)["mark"]), offset
    if end != offset:
        handle.truncate(end)
    return mark


def _append(handle: Any, rows: pa.RecordBatch, top: spi.Mark) -> None:
    lines = [json.dumps({"row": row}, default=str) for row in rows.to_pylist()]
    lines.append(json.dumps({"mark": spi.mark_text(top)}))
    handle.write(("\n".join(lines) + "\n").encode())  # one write: the rows and their mark
    handle.flush()
    os.fsync(handle.fileno())
