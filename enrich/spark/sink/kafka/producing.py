"""A task's records sent to Kafka, at least once: produced, flushed, every delivery
report checked before the write returns.

Guarantees:

- When :func:`send_all` returns, the broker has taken every record of it (each record's
  delivery report came back without an error): the task's commit message follows only
  records that are written. ``acks`` is the producer's (librdkafka's default: all
  in-sync replicas).
- When a record fails (the broker refused it, ``delivery.timeout.ms`` passed),
  :class:`~.alo_errors.DeliveryFailed` names its topic and partition and the count;
  records delivered before stay, and Spark's retry writes the task's rows again.
- No message holds a secret of the producer's settings.

Producers are kept per Python worker process (Spark reuses its workers) and settings,
at most :data:`KEPT_PRODUCERS`: a producer's first connection and metadata cost a round
trip or more, which a kept one saves in every later batch.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from ..kafka_config import scrubbed
from .alo_errors import DeliveryFailed, KafkaAloRefused
from .record_columns import Record

KEPT_PRODUCERS = 8
POLL_EVERY = 1000  # records produced between two polls (delivery reports served)
FLUSH_STEP = 1.0  # seconds a flush waits before checking the reports again

_kept: OrderedDict[tuple[int, tuple[tuple[str, str], ...]], Any] = OrderedDict()


def producer_for(config: dict[str, str]) -> Any:
    """This process's producer for ``config`` (made on first use).

    Raises:
        KafkaAloRefused: the client refused a setting (its message without secrets).
    """
    from confluent_kafka import KafkaException, Producer

    key = (os.getpid(), tuple(sorted(config.items())))
    producer = _kept.pop(key, None)
    if producer is None:
        try:
            producer = Producer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise KafkaAloRefused(
                f"kafka-alo sink: the producer refused its settings (the kafka.* "
                f"options): {scrubbed(str(exc), config)}"
            ) from None  # the client's exception may quote a setting's value
    _kept[key] = producer
    while len(_kept) > KEPT_PRODUCERS:
        _, dropped = _kept.popitem(last=False)
        dropped.flush(FLUSH_STEP)
    return producer


class Delivery:
    """One write's delivery reports (the producer calls it from ``poll``/``flush``, on
    the task's thread)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first: tuple[str, int, str] | None = None  # topic, partition, error

    def __call__(self, error: Any, message: Any) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first is None:
            self.first = (str(message.topic()), int(message.partition()), str(error))

    def check(self, config: dict[str, str], sent: int) -> None:
        """Raise :class:`DeliveryFailed` when a record failed."""
        if self.first is None:
            return
        topic, partition, error = self.first
        where = f"partition {partition}" if partition >= 0 else "no partition assigned"
        raise DeliveryFailed(
            f"kafka-alo sink: {self.failed} of {sent} records of this task were not "
            f"delivered; the first to topic {topic!r}, {where}: "
            f"{scrubbed(error, config)}. The task fails and Spark writes its rows again",
            topic,
            partition,
            self.failed,
        )


def send_all(config: dict[str, str], records: Iterable[Record]) -> int:
    """Produce ``records``, flush, and check every delivery report; returns how many
    were written (see the module docstring).

    Raises:
        DeliveryFailed: a record was not delivered.
        KafkaAloRefused: the producer refused its settings, or a record (too large...).
    """
    from confluent_kafka import KafkaException

    producer = producer_for(config)
    delivery = Delivery()
    sent = 0
    for topic, value, key, partition, headers in records:
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=partition,
                    headers=headers,
                    on_delivery=delivery,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
            except KafkaException as exc:
                raise KafkaAloRefused(
                    f"kafka-alo sink: a record for topic {topic!r} was refused before "
                    f"sending: {scrubbed(str(exc), config)}"
                ) from None
        sent += 1
        if sent % POLL_EVERY == 0:
            producer.poll(0)
            delivery.check(config, sent)
    # Bounded by delivery.timeout.ms: by then every record has its report.
    while producer.flush(FLUSH_STEP) > 0:
        delivery.check(config, sent)
    delivery.check(config, sent)
    return sent
