"""The ``kafka-alo`` sink's options, read once into a frozen value.

Options (Spark's Kafka sink's names):
    kafka.bootstrap.servers: the target cluster (required). Every ``kafka.*`` option is
        given to the producer without its prefix (:mod:`..kafka_config`); secrets are
        never shown.
    topic: the topic every record goes to; without it each row's ``topic`` column
        names its own (as in Spark's sink, the option wins over the column).

And one of this sink's own:
    valueColumns: columns written as each record's value, one JSON object of them per
        row, instead of a ``value`` column (comma-separated; ``*``: every column but
        ``key``, ``topic``, ``partition`` and ``headers``). For a query whose last step
        runs in the sink's write (a lookup join under ``low_latency``), where no
        ``to_json`` can follow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kafka_config import PRODUCER_DEFAULTS, caseless, client_config, masked
from .alo_errors import KafkaAloRefused

ALL = "*"


@dataclass(frozen=True, kw_only=True)
class AloSettings:
    """The sink's options, validated on construction (:meth:`of` reads Spark's).

    Attributes:
        client: the producer's settings (``kafka.*`` without the prefix); secrets masked
            in the repr.
        topic: the target topic, or None (each row's ``topic`` column names it).
        value_columns: the columns encoded as each value's JSON object (``("*",)``:
            all but Kafka's own), or None (the ``value`` column is the value).
    """

    client: dict[str, str] = field(repr=False)
    topic: str | None = None
    value_columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.client.get("bootstrap.servers"):
            raise KafkaAloRefused(
                'the kafka-alo sink needs .option("kafka.bootstrap.servers", ...): the '
                "cluster to write to"
            )
        if self.value_columns is not None and not self.value_columns:
            raise KafkaAloRefused("option valueColumns names no column")

    def __repr__(self) -> str:
        return (
            f"AloSettings(topic={self.topic!r}, value_columns={self.value_columns!r}, "
            f"client={masked(self.client)!r})"
        )

    @property
    def target(self) -> str:
        """The target topic, as logs name it."""
        return self.topic or "(each row's topic)"

    def producer_config(self) -> dict[str, str]:
        """The producer's settings: the options' over the defaults (murmur2, as Java's
        partitioner, so a key lands where Spark's sink would put it)."""
        return {**PRODUCER_DEFAULTS, **self.client}

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> AloSettings:
        """Read Spark's options (see the module docstring)."""
        options = caseless(options)
        topic = options.get("topic", "").strip() or None
        text = options.get("valueColumns")
        columns = None
        if text is not None:
            columns = tuple(name.strip() for name in text.split(",") if name.strip())
        return cls(
            client=client_config(options, error=KafkaAloRefused),
            topic=topic,
            value_columns=columns,
        )
