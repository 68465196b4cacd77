"""One source partition's rows of a task, written to the target topic in one Kafka
transaction together with the partition's new mark.

Guarantees (for ``read_committed`` consumers of the target topic):

- A row is written by a committed transaction at most once: a transaction writes only
  rows above the mark it read, and its commit moves the mark past them, atomically.
- The mark read is the last committed one: a fresh producer reads it after
  ``init_transactions``, which fences every earlier producer of the transactional id and
  completes (or aborts) what it left open; a producer kept from an earlier task uses the
  mark it committed itself, which is the last unless another producer took its id since,
  and then its commit fails as fenced and the transaction is done again by a fresh
  producer reading the marks again.
- The transaction is open only while its rows are produced and committed: the task has
  gathered them before (so a slow upstream stage, such as a lookup join, does not run
  into ``transaction.timeout.ms``).

Producers are kept per Python worker process and transactional id (Spark reuses its
workers), at most ``KEPT_PRODUCERS`` of them: ``init_transactions`` costs a round trip to
the transaction coordinator and the marks' read (~0.1-0.6 s here) that a kept producer
saves in every later batch.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from . import marks
from .eos_errors import ProducerFenced, TransactionFailed
from .settings import KafkaSinkSettings
from .source import (
    Mark,
    SourceColumns,
    encode_mark,
    higher,
    mark_key,
    mark_partition,
    transactional_id,
    unwritten,
)
from .stats import KafkaSinkCounts

log = logging.getLogger("enrich.spark.sink.kafka_eos")

KEPT_PRODUCERS = 64
INIT_TIMEOUT = 120.0  # seconds for init_transactions (it waits for a pending commit)
COMMIT_TIMEOUT = 120.0


@dataclass
class _Held:
    producer: Any
    mark: Mark | None
    partitions: int  # of the marks topic


_kept: OrderedDict[tuple[int, str], _Held] = OrderedDict()


def _take(key: tuple[int, str]) -> _Held | None:
    return _kept.pop(key, None)


def _keep(key: tuple[int, str], held: _Held) -> None:
    _kept[key] = held
    while len(_kept) > KEPT_PRODUCERS:
        _kept.popitem(last=False)


def _fresh(settings: KafkaSinkSettings, txn_id: str, source: str) -> _Held:
    from confluent_kafka import Producer

    producer = Producer(settings.producer_config(txn_id))
    producer.init_transactions(INIT_TIMEOUT)
    partitions = marks.partitions_of(settings)
    return _Held(producer, marks.read_mark(settings, source, partitions), partitions)


def write_source(
    settings: KafkaSinkSettings,
    columns: SourceColumns,
    source: str,
    batches: list[pa.RecordBatch],
    batch_id: Any,
    pause: Callable[[str], None] = lambda _: None,
) -> KafkaSinkCounts:
    """Write the rows of ``source`` (one source partition) above its mark, and the new
    mark, in one transaction; retried after a fence or an abortable error up to
    ``settings.retries`` times.

    Raises:
        ProducerFenced: fenced on every try (another attempt keeps taking the id).
        TransactionFailed: the transaction could not commit for another reason.
    """
    from confluent_kafka import KafkaException

    txn_id = transactional_id(settings.id_prefix, settings.identity, source)
    key = (os.getpid(), txn_id)
    counts = KafkaSinkCounts()
    total = sum(len(b) for b in batches)
    last: Exception | None = None
    for _ in range(settings.retries + 1):
        held = _take(key)
        try:
            if held is None:
                held = _fresh(settings, txn_id, source)
            kept = [unwritten(b, columns, held.mark) for b in batches]
            rows = [b for b, _ in kept if len(b)]
            mark = None
            for _, top in kept:
                mark = higher(mark, top)
            written = sum(len(b) for b in rows)
            if mark is None:  # every row was written before: no transaction
                _keep(key, held)
                return counts + KafkaSinkCounts(skipped=total)
            _transact(settings, held, rows, source, mark, batch_id, pause)
        except KafkaException as exc:
            error = exc.args[0]
            last = exc
            if held is not None and not error.fatal() and error.txn_requires_abort():
                try:
                    held.producer.abort_transaction(COMMIT_TIMEOUT)
                    _keep(key, held)  # still ours: its mark stands
                except KafkaException:
                    pass  # dropped: a fresh producer's init aborts it
                counts += KafkaSinkCounts(aborted=1)
            elif error.name() in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"):
                counts += KafkaSinkCounts(fenced=1, aborted=1)
            else:
                # Fatal, or the commit's outcome unknown (a timeout): drop the producer;
                # the next one's init_transactions completes or aborts what it left.
                counts += KafkaSinkCounts(aborted=1)
            log.warning(
                "kafka-eos sink: transaction of %s (transactional id %s) not committed "
                "(%s); trying again with %s",
                source,
                txn_id,
                error.name(),
                "the same producer" if key in _kept else "a new producer (the marks read again)",
            )
            continue
        except BaseException:
            # Any other failure (the task cancelled...): no kept producer with an open
            # transaction; the next producer of this id aborts it on init.
            raise
        held.mark = mark
        _keep(key, held)
        return counts + KafkaSinkCounts(committed=1, records=written, skipped=total - written)
    if counts.fenced:
        raise ProducerFenced(
            f"kafka-eos sink: the transaction of source {source} was fenced on each of "
            f"{settings.retries + 1} tries (another producer with transactional id "
            f"{txn_id!r} started each time: a speculative or second attempt of the task, "
            f"another query with the same sink, or the source partition split over "
            f"several tasks of the batch, which share its id: a shuffle before the sink; "
            f"kafka_eos_writer refuses that plan when the query is built): {last}",
            source,
            txn_id,
        )
    raise TransactionFailed(
        f"kafka-eos sink: the transaction of source {source} did not commit after "
        f"{settings.retries + 1} tries: {last}",
        source,
        txn_id,
    )


def _transact(
    settings: KafkaSinkSettings,
    held: _Held,
    rows: list[pa.RecordBatch],
    source: str,
    mark: Mark,
    batch_id: Any,
    pause: Callable[[str], None],
) -> None:
    producer = held.producer
    topic = settings.topic
    producer.begin_transaction()
    for batch in rows:
        values = batch.column(settings.value_column).to_pylist()
        names = batch.schema.names
        if settings.key_column in names:
            keys = batch.column(settings.key_column).to_pylist()
            for value, k in zip(values, keys, strict=True):
                _produce(producer, topic, value, k)
        else:
            for value in values:
                _produce(producer, topic, value, None)
        pause("mid_transaction")
    key = mark_key(settings.identity, source)
    producer.produce(
        settings.marks_topic,
        value=encode_mark(mark, batch_id),
        key=key,
        partition=mark_partition(key, held.partitions),
    )
    pause("before_commit")
    producer.commit_transaction(COMMIT_TIMEOUT)


def _produce(producer: Any, topic: str, value: Any, key: Any) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)
