"""The project's own Kafka broker (``enrich.demo.kafka_broker``): one KRaft node from
Kafka's jars, started on free loopback ports, which a client writes to and reads from,
and which stops cleanly."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from enrich.demo.kafka_broker import KafkaBroker, free_port
from tests.support.kafka_fixtures import consume, create_topic, kafka_broker, produce

__all__ = ("kafka_broker",)

pytestmark = [pytest.mark.timeout(180)]


def test_the_broker_takes_and_gives_records(kafka_broker: KafkaBroker) -> None:
    create_topic(kafka_broker.bootstrap, "broker-check", partitions=3)
    values = [str(i).encode() for i in range(50)]
    produce(kafka_broker.bootstrap, "broker-check", values)
    assert sorted(consume(kafka_broker.bootstrap, "broker-check", 50), key=int) == values


def test_a_broker_stops_cleanly_and_frees_its_port(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    broker = KafkaBroker(tmp_path / "own", port=free_port())
    try:
        broker.start()
    except Exception as exc:  # no jars here: the session's fixture says how to get them
        pytest.skip(str(exc))
    assert broker.is_running()
    broker.stop()
    # SIGTERM runs the JVM's shutdown hooks, then the JVM exits with 128 + 15.
    assert broker.process is not None and broker.process.returncode in (0, 143)
    assert not broker.is_running()
    assert "App info kafka.server for 1 unregistered" in broker.log_path.read_text(errors="replace")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()


def test_a_restarted_broker_keeps_its_port_and_records(tmp_path: Path) -> None:
    """``restart()`` is what the crash runs restart mid-commit: the same ports and log
    directory, so clients reconnect to the same address and find what was written."""
    pytest.importorskip("confluent_kafka")
    broker = KafkaBroker(tmp_path / "own")
    try:
        broker.start()
    except Exception as exc:  # no jars here: the session's fixture says how to get them
        pytest.skip(str(exc))
    try:
        address = broker.bootstrap
        create_topic(address, "kept", partitions=2)
        produce(address, "kept", [b"before"])
        first = broker.process
        broker.restart()
        assert broker.process is not first and broker.is_running()
        assert broker.bootstrap == address
        produce(address, "kept", [b"after"])
        assert sorted(consume(address, "kept", 2)) == [b"after", b"before"]
    finally:
        broker.stop()
