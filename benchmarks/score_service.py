"""The scoring service of ``benchmarks/async_map.py``: the demo's answers, a tail chosen
by row id, several server processes on one port.

``POST /score`` takes a JSON object of columns and answers
``{"score": s, "label": l}`` (:func:`enrich.demo.scoring.score`: a function of the
object alone, so that every contender's answers can be checked against each other);
``POST /score/_batch`` takes a JSON list of such objects and answers one result per
item, in order. A request waits ``latency`` seconds, or ``slow_latency`` when its row's
``id`` is divisible by ``slow_every`` (a batch: when any item's is), so every contender
meets the same slow rows. Apart from the demo's service (whose tail is chosen by a hash
of the body) so that the tail is known per row id, and so that it can run as several
processes: each is an aiohttp server on uvloop (when installed) listening on the same
port with ``SO_REUSEPORT``, and the kernel spreads the connections over them; one
process alone costs tens of microseconds of CPU per request, which on 2 cores is a
share of what the clients could use.

Run: ``python -m benchmarks.score_service --port 8091 --latency 0.005``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web

from enrich.demo.local import _wait_for_port, free_port
from enrich.demo.scoring import score

STARTUP_TIMEOUT = 20.0


def make_app(latency: float, slow_every: int = 0, slow_latency: float = 0.0) -> web.Application:
    def wait(ids: list[int]) -> float:
        if slow_every and any(i % slow_every == 0 for i in ids):
            return slow_latency
        return latency

    async def one(request: web.Request) -> web.Response:
        columns = json.loads(await request.read())
        pause = wait([columns["id"]])
        if pause:
            await asyncio.sleep(pause)
        return web.json_response(score(columns))

    async def batch(request: web.Request) -> web.Response:
        rows = json.loads(await request.read())
        pause = wait([row["id"] for row in rows])
        if pause:
            await asyncio.sleep(pause)
        return web.json_response([score(row) for row in rows])

    app = web.Application()
    app.router.add_post("/score", one)
    app.router.add_post("/score/_batch", batch)
    return app


@dataclass(frozen=True)
class Service:
    """A running service: its base URL and the pids of its server processes."""

    base: str
    pids: tuple[int, ...]

    def cpu_seconds(self) -> float:
        """CPU time (user + system) its processes used so far."""
        return sum(process_cpu(pid) for pid in self.pids)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid``, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def score_service(
    latency: float, slow_every: int = 0, slow_latency: float = 0.0, processes: int = 2
) -> Iterator[Service]:
    """Run the service as ``processes`` server processes on one free port."""
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.score_service", "--port", str(port)]
    command += ["--latency", str(latency), "--slow-every", str(slow_every)]
    command += ["--slow-latency", str(slow_latency)]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
            )
            started.append(process)
            # Each says when it listens: the port answering says only that one does.
            assert process.stdout is not None
            if process.stdout.readline().strip() != b"listening":
                raise RuntimeError(f"a scoring service process exited ({process.poll()})")
        _wait_for_port(port, started[0], "the scoring service")
        yield Service(f"http://127.0.0.1:{port}", tuple(p.pid for p in started))
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def _drive(base: str, seconds: float, connections: int) -> int:
    """One client process: ``connections`` keep-alive connections, each sending a POST
    and reading its answer in turn for ``seconds``; answers read. Raw HTTP/1.1 on
    asyncio streams (uvloop), far cheaper per request than aiohttp, so that the
    service's own cost shows."""
    host, port = base.removeprefix("http://").split(":")

    def request(n: int) -> bytes:
        body = json.dumps({"id": n, "user_id": 1, "amount": 1.5}).encode()
        head = f"POST /score HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body

    async def run() -> int:
        done = 0
        stop = time.perf_counter() + seconds

        async def one_after_another(n: int) -> None:
            nonlocal done
            reader, writer = await asyncio.open_connection(host, int(port))
            sent = request(2 * n + 1)  # odd ids: none is slow
            while time.perf_counter() < stop:
                writer.write(sent)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                done += 1
            writer.close()

        await asyncio.gather(*(one_after_another(n) for n in range(connections)))
        return done

    import uvloop

    return uvloop.run(run())


def service_alone(service: Service, seconds: float = 5.0, clients: int = 2) -> tuple[float, float]:
    """Requests/s the service answers ``clients`` processes of raw HTTP (100 keep-alive
    connections each, no Spark), and the cores it used meanwhile."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        pool.map(abs, range(clients))  # started before the timing
        cpu = service.cpu_seconds()
        started = time.perf_counter()
        counts = pool.starmap(_drive, [(service.base, seconds, 100)] * clients)
        elapsed = time.perf_counter() - started
    return sum(counts) / elapsed, (service.cpu_seconds() - cpu) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.005)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--slow-latency", type=float, default=0.0)
    args = parser.parse_args()
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is in the fast extra
        loop = asyncio.new_event_loop()

    def ready(*_: object) -> None:
        print("listening", flush=True)

    web.run_app(
        make_app(args.latency, args.slow_every, args.slow_latency),
        host="127.0.0.1",
        port=args.port,
        reuse_port=True,
        access_log=None,
        print=ready,
        loop=loop,
    )


if __name__ == "__main__":
    main()
