"""A one-node Apache Kafka broker for the tests, the demo and the benchmarks, run from
Kafka's own jars with the machine's Java (17+): no Docker, no download at run time.

``scripts/kafka/fetch`` (run by ``./scripts/dev test`` and CI) copies the jars once into
the project's git-ignored cache, ``.cache/kafka/`` (``$ENRICH_KAFKA_JARS`` names another
folder): ``broker/`` holds Apache Kafka's broker (``kafka_2.13``) and its dependencies,
``connector/`` Spark's Kafka connector (``spark-sql-kafka-0-10_2.13``) and its own. The
versions are pinned in one place, ``scripts/kafka/pom.xml``.

:class:`KafkaBroker` formats a fresh KRaft log directory and starts the broker in
combined mode (broker and controller in one process) on two free loopback ports; it is
ready when its log says ``Kafka Server started`` and its port answers. ``stop()`` ends
it with SIGTERM (a clean shutdown), then SIGKILL after a grace period.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

JARS_VARIABLE = "ENRICH_KAFKA_JARS"
READY_LINE = "Kafka Server started"
START_TIMEOUT = 120.0  # seconds: a JVM's start on a loaded 2-core machine
STOP_GRACE = 20.0
# A small heap: the broker holds a few test topics (Kafka's scripts default to 1 GiB).
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
_ROOT = Path(__file__).resolve().parents[2]


class BrokerUnavailable(RuntimeError):
    """The broker cannot be started here (no jars, no Java, or it did not come up); the
    message says why and what to run."""


def jars_dir() -> Path:
    """Where the fetched jars are: ``$ENRICH_KAFKA_JARS``, else the checkout's
    ``.cache/kafka``."""
    configured = os.environ.get(JARS_VARIABLE)
    return Path(configured) if configured else _ROOT / ".cache" / "kafka"


def broker_jars() -> list[Path]:
    """The broker's classpath; raises :class:`BrokerUnavailable` when not fetched."""
    return _jars("broker", "kafka_2.13-")


def connector_jars() -> list[Path]:
    """Spark's Kafka connector and its dependencies (for ``spark.jars``); raises
    :class:`BrokerUnavailable` when not fetched."""
    return _jars("connector", "spark-sql-kafka-0-10_2.13-")


def _jars(part: str, main: str) -> list[Path]:
    folder = jars_dir() / part
    jars = sorted(folder.glob("*.jar"))
    if not any(jar.name.startswith(main) for jar in jars):
        raise BrokerUnavailable(
            f"no {main.rstrip('-')} jar in {folder}: run scripts/kafka/fetch (Maven "
            "Central through mvn; ./scripts/dev test runs it) or point "
            f"{JARS_VARIABLE} at a folder holding broker/ and connector/"
        )
    return jars


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerUnavailable("the Kafka broker needs Java 17+: no java on PATH, JAVA_HOME unset")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class KafkaBroker:
    """One KRaft node in ``directory`` (its config, data and log).

    ``bootstrap`` is the address clients (and Spark's ``kafka.bootstrap.servers``) use.
    """

    directory: Path
    port: int = 0
    controller_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def config(self) -> str:
        """``server.properties``: combined mode, PLAINTEXT on loopback, one replica of
        everything (a single node), topics created on first use."""
        data = self.directory / "data"
        return "\n".join(
            (
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={data}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "",
            )
        )

    def start(self, timeout: float = START_TIMEOUT) -> KafkaBroker:
        """Format a fresh log directory and start the broker; returns when it is ready.

        Raises:
            BrokerUnavailable: no jars or Java, or the broker exited or did not log its
                readiness within ``timeout`` (the message quotes its log's end).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join(str(jar) for jar in broker_jars())
        if not self.port:
            self.port = free_port()
        if not self.controller_port:
            self.controller_port = free_port()
        properties = self.directory / "server.properties"
        properties.write_text(self.config())
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        command = [java(), *JVM_OPTIONS, "-cp", classpath]
        formatted = subprocess.run(
            [
                *command,
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster}",
                "-c",
                str(properties),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if formatted.returncode != 0:
            raise BrokerUnavailable(
                f"formatting the broker's log directory failed: {formatted.stderr[-2000:]}"
            )
        self._launch(timeout)
        return self

    def restart(self, timeout: float = START_TIMEOUT) -> KafkaBroker:
        """Stop the broker and start it again on the same ports and log directory: its
        topics, committed offsets and open transactions' state survive, as in an
        operator's rolling restart of a one-node cluster."""
        self.stop()
        self._launch(timeout)
        return self

    def _launch(self, timeout: float) -> None:
        classpath = os.pathsep.join(str(jar) for jar in broker_jars())
        properties = self.directory / "server.properties"
        ready_before = self._ready_lines()
        with self.log_path.open("ab") as log:  # a restart appends to the first start's log
            self.process = subprocess.Popen(
                [java(), *JVM_OPTIONS, "-cp", classpath, "kafka.Kafka", str(properties)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # stop() signals the broker, not our group
            )
        self._wait_ready(timeout, ready_before)

    def _ready_lines(self) -> int:
        try:
            return self.log_path.read_text(errors="replace").count(READY_LINE)
        except FileNotFoundError:
            return 0

    def _wait_ready(self, timeout: float, ready_before: int) -> None:
        """Until this launch logs its own ready line (a restart's log holds the last one's)."""
        deadline = time.monotonic() + timeout
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerUnavailable(
                    f"the Kafka broker exited with {self.process.returncode}: {self._tail()}"
                )
            if self._ready_lines() > ready_before and _answers(self.port):
                return
            time.sleep(0.1)  # polling a log file: no event to wait on across processes
        self.stop()
        raise BrokerUnavailable(
            f"the Kafka broker was not ready in {timeout:.0f} s: {self._tail()}"
        )

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = STOP_GRACE) -> None:
        """A clean shutdown (SIGTERM), then SIGKILL after ``grace`` seconds."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


def main(argv: list[str] | None = None) -> int:
    """``python -m enrich.demo.kafka_broker [--port 9092] [--dir DIR]``: one broker on
    loopback until Ctrl-C (the examples' ``ENRICH_KAFKA`` default is 127.0.0.1:9092)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=(main.__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--dir", default=None, help="log directory (default: a temporary one)")
    args = parser.parse_args(argv)
    directory = Path(args.dir or tempfile.mkdtemp(prefix="enrich-kafka-"))
    try:
        broker = KafkaBroker(directory, port=args.port).start()
    except BrokerUnavailable as exc:
        print(f"error: {exc}")
        return 1
    print(f"kafka: {broker.bootstrap}   (log: {broker.log_path}); serving until Ctrl-C", flush=True)
    try:
        assert broker.process is not None
        broker.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
