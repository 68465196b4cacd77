"""A job's Kafka source or sink (Spark's ``kafka`` format), checked before Spark starts.

Spark's Kafka connector reads its options as Kafka users know them, and the checks here
keep its names and meanings: ``kafka.bootstrap.servers``; one of ``subscribe``,
``subscribePattern`` or ``assign``; ``maxOffsetsPerTrigger`` bounds a micro-batch (a
whole number above 0); ``failOnDataLoss`` is Spark's (``true``, the default, fails the
query when offsets it has not read are gone; ``false`` goes on past them). Every
``kafka.*`` option goes to the Kafka client as it is (``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``...): its value is never printed
here, in a warning or an error, since some hold credentials.

:func:`broker_checks` is ``enrich check``'s line per Kafka endpoint: each bootstrap
server is connected to (TCP, within a timeout), and a broker that is down is named in
one line. It shows that a broker listens there; credentials are tried by the query.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Any

from jobs._files import ConfigError

FORMAT = "kafka"
BOOTSTRAP = "kafka.bootstrap.servers"
SUBSCRIPTIONS = ("subscribe", "subscribePattern", "assign")
PASSTHROUGH = "kafka."  # options handed to the Kafka client as they are
CONNECT_TIMEOUT = 5.0  # seconds per bootstrap server

# What Spark's Kafka source and sink read besides kafka.* (Structured Streaming + Kafka
# Integration Guide, Spark 4.x).
SOURCE_OPTIONS = (
    BOOTSTRAP,
    *SUBSCRIPTIONS,
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)
SINK_OPTIONS = (BOOTSTRAP, "topic", "includeHeaders", "checkpointLocation")


def is_passthrough(fmt: str, option: str) -> bool:
    """Whether ``option`` goes to the Kafka client as it is (``kafka.*``)."""
    return fmt in (FORMAT, "kafka-eos") and option.lower().startswith(PASSTHROUGH)


def validate(options: Mapping[str, str], role: str, where: str) -> None:
    """Raise :class:`ConfigError` for what Spark's connector would refuse at start (or
    read otherwise than meant); ``options`` keyed by Spark's spelling."""
    lowered = {k.lower(): v for k, v in options.items()}
    if not lowered.get(BOOTSTRAP, "").strip():
        raise ConfigError(
            f"{where}: format 'kafka' needs options.{BOOTSTRAP} (host:port of the brokers, "
            "comma-separated)"
        )
    if role == "sink":
        return
    chosen = [s for s in SUBSCRIPTIONS if s.lower() in lowered]
    if len(chosen) != 1:
        found = f"got {', '.join(chosen)}" if chosen else "got none"
        raise ConfigError(
            f"{where}: a kafka source needs exactly one of options.subscribe (topics, "
            f"comma-separated), options.subscribePattern or options.assign; {found}"
        )
    limit = lowered.get("maxoffsetspertrigger")
    if limit is not None and not (limit.strip().isdigit() and int(limit) > 0):
        raise ConfigError(
            f"{where}.options.maxOffsetsPerTrigger bounds the records of a micro-batch: a "
            f"whole number above 0, got {limit!r}"
        )
    loss = lowered.get("failondataloss")
    if loss is not None and loss.strip().lower() not in ("true", "false"):
        raise ConfigError(
            f"{where}.options.failOnDataLoss must be true or false (Spark's meaning: true "
            f"fails the query when offsets it has not read are gone), got {loss!r}"
        )


def bootstrap_servers(options: Mapping[str, str]) -> list[tuple[str, int]]:
    """The (host, port) pairs of ``kafka.bootstrap.servers``."""
    text = next((v for k, v in options.items() if k.lower() == BOOTSTRAP), "")
    servers = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            servers.append((host.strip("[]"), int(port)))
    return servers


def reach(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """None when ``host:port`` accepts a connection, else the reason."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def broker_checks(config: Any, timeout: float = CONNECT_TIMEOUT) -> list[tuple[str, bool, str]]:
    """One ``(endpoint, ok, detail)`` per Kafka source or sink of ``config`` (``enrich
    check`` prints each as a line): ok when a bootstrap server accepts a connection,
    else the servers and why, in one line. No option but the servers' addresses is
    printed."""
    found: list[tuple[str, bool, str]] = []
    for where in ("source", "sink", "dead_letter"):
        spec = getattr(config, where, None)
        if spec is None or spec.format != FORMAT:
            continue
        servers = bootstrap_servers(spec.options)
        started = time.perf_counter()
        failures = []
        for host, port in servers:
            reason = reach(host, port, timeout)
            if reason is None:
                elapsed = (time.perf_counter() - started) * 1e3
                detail = f"broker {host}:{port} accepts connections ({elapsed:.0f} ms)"
                found.append((where, True, detail))
                break
            failures.append(f"{host}:{port} ({reason})")
        else:
            listed = ", ".join(failures) or "none listed"
            detail = f"no Kafka broker answers at {listed}"
            found.append((where, False, detail))
    return found
