"""The ``kafka-eos`` sink's options, read once into a frozen value.

Options (Spark's Kafka sink's names where it has them):
    kafka.bootstrap.servers: the target cluster (required). Every ``kafka.*`` option is
        given to the producer (and to the marks' consumer) without its prefix, as Spark's
        Kafka sink does; confluent-kafka (librdkafka) names most settings as Java does.
        ``kafka.sasl.jaas.config`` (Java's form, ``... username="u" password="p";``)
        becomes librdkafka's ``sasl.username``/``sasl.password``. Secrets are never shown.
    topic: the target topic (required; a row's ``topic`` column is its *source* topic).
    checkpointLocation: the query's checkpoint; with the topic it names the sink
        (its transactional ids and marks), unless ``sinkName`` does. One is required.
    sinkName: a stable name for the sink instead of the checkpoint's path.
    valueColumn / keyColumn: the columns written as each record's value (default
        ``value``, required) and key (default ``key``, when the DataFrame has it);
        string or binary.
    sourceIdColumn / sourceStreamColumn: the columns holding each row's source record
        (default: ``offset`` and ``topic,partition`` when the rows have Kafka's columns,
        else ``stream_id`` and ``stream_key`` as the redis-stream source names them).
    marksTopic: the compacted topic holding the sink's source marks (default
        ``enrich-eos-marks``; created on first use, ``marksPartitions`` partitions).
    transactionalIdPrefix: the start of every transactional id (default ``enrich-eos``).
    maxTransactionRetries: how many times a task retries one source partition's
        transaction after it was fenced or aborted (default 3).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kafka_config import (
    PRODUCER_DEFAULTS,
    caseless,
    client_config as _client_config,
    masked,
)
from ..sink_spi import SourceFields, source_fields
from .eos_errors import KafkaSinkRefused, MissingOption

DEFAULT_MARKS_TOPIC = "enrich-eos-marks"
DEFAULT_ID_PREFIX = "enrich-eos"
DEFAULT_RETRIES = 3
DEFAULT_MARKS_PARTITIONS = 1


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options for the client (:func:`..kafka_config.client_config`).

    Raises:
        KafkaSinkRefused: a JAAS line without username or password.
    """
    return _client_config(options, error=KafkaSinkRefused)


def _int(options: Mapping[str, str], name: str, default: int, low: int) -> int:
    text = str(options.get(name, default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name} must be a whole number, got {text!r}") from None
    if value < low:
        raise ValueError(f"option {name} must be >= {low}, got {value}")
    return value


@dataclass(frozen=True, kw_only=True)
class KafkaSinkSettings:
    """The sink's options, validated on construction (:meth:`of` reads Spark's).

    Attributes:
        client: the producer's settings (``kafka.*`` without the prefix); secrets masked
            in the repr.
        topic: the target topic.
        identity: a short name of this sink (topic + checkpoint or ``sinkName``): the
            base of its transactional ids and marks' keys.
        value_column, key_column: the columns written (``key_column`` may be absent
            from the rows unless ``key_required``).
        source: the source columns named by option, or None (found from the schema:
            :func:`enrich.spark.sink.sink_spi.resolve`).
        marks_topic, marks_partitions: where the source marks go.
        id_prefix: the start of the transactional ids.
        retries: transaction retries after a fence or an abortable error.
    """

    client: dict[str, str] = field(repr=False)
    topic: str
    identity: str
    value_column: str = "value"
    key_column: str = "key"
    key_required: bool = False
    source: SourceFields | None = None
    marks_topic: str = DEFAULT_MARKS_TOPIC
    marks_partitions: int = DEFAULT_MARKS_PARTITIONS
    id_prefix: str = DEFAULT_ID_PREFIX
    retries: int = DEFAULT_RETRIES

    def __post_init__(self) -> None:
        if not self.client.get("bootstrap.servers"):
            raise MissingOption("kafka.bootstrap.servers", "the cluster to write to")
        if not self.topic:
            raise MissingOption("topic", "the target topic")
        if self.topic == self.marks_topic:
            raise ValueError(f"option topic and marksTopic name the same topic {self.topic!r}")
        if self.retries < 0 or self.marks_partitions < 1:
            raise ValueError(
                f"retries must be >= 0 and marks_partitions >= 1, got {self.retries}, "
                f"{self.marks_partitions}"
            )

    def __repr__(self) -> str:
        return (
            f"KafkaSinkSettings(topic={self.topic!r}, identity={self.identity!r}, "
            f"client={masked(self.client)!r}, marks_topic={self.marks_topic!r})"
        )

    @property
    def bootstrap(self) -> str:
        return self.client["bootstrap.servers"]

    def producer_config(self, transactional_id: str) -> dict[str, str]:
        """The producer's settings for one transactional id."""
        return {**PRODUCER_DEFAULTS, **self.client, "transactional.id": transactional_id}

    def consumer_config(self) -> dict[str, str]:
        """A ``read_committed`` consumer of the marks (no group offsets committed)."""
        drop = {"transactional.id", "partitioner", "linger.ms", "acks", "enable.idempotence"}
        base = {
            k: v
            for k, v in self.client.items()
            if k not in drop and not k.startswith("transaction")
        }
        return {
            **base,
            "group.id": f"{self.id_prefix}-{self.identity}-marks",
            "isolation.level": "read_committed",
            "enable.auto.commit": "false",
            "enable.partition.eof": "false",
        }

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> KafkaSinkSettings:
        """Read Spark's options (see the module docstring)."""
        # Spark's options are case-insensitive (pyspark hands them over lowercased).
        options = caseless(options)
        client = client_config(options)
        topic = options.get("topic", "").strip()
        name = options.get("sinkName", "").strip()
        checkpoint = options.get("checkpointLocation", "").strip()
        if not name and not checkpoint:
            raise MissingOption(
                "checkpointLocation",
                "with the topic it names the sink's transactional ids and source marks, "
                'which a restart of the query must find again (or set .option("sinkName", '
                "a stable name))",
            )
        identity = hashlib.sha1(f"{topic}\0{name or checkpoint}".encode()).hexdigest()[:16]
        return cls(
            client=client,
            topic=topic,
            identity=identity,
            value_column=options.get("valueColumn", "value").strip(),
            key_column=options.get("keyColumn", "key").strip(),
            key_required="keyColumn" in options,
            source=source_fields(options, error=ValueError),
            marks_topic=options.get("marksTopic", DEFAULT_MARKS_TOPIC).strip(),
            marks_partitions=_int(options, "marksPartitions", DEFAULT_MARKS_PARTITIONS, 1),
            id_prefix=options.get("transactionalIdPrefix", DEFAULT_ID_PREFIX).strip(),
            retries=_int(options, "maxTransactionRetries", DEFAULT_RETRIES, 0),
        )
