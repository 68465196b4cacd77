"""The runs of :mod:`benchmarks.latency`: the producer, the measure of the output, and
the consumers, each started as a process of its own (``python -m benchmarks._latency_runs
--spark URL PATH`` or ``--hand URL N``)."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis

from .lookup import KEYS

RATES = tuple(
    int(r) for r in os.environ.get("ENRICH_BENCH_LATENCY_RATES", "2000,10000,30000").split(",")
)
SECONDS = float(os.environ.get("ENRICH_BENCH_LATENCY_SECONDS", 30))
FIRST = 10.0  # seconds of input counted as "the first 10 s"
TARGET_RATE = 10_000
SOURCE, OUTPUT = "orders", "enriched"
PRODUCED = "bench:produced"  # the parent tells a run how many entries it sent
SCHEMA = "stream_id string, order_id long, user_id long, amount double, ts double"
DRAIN = 180.0  # seconds a run may take to catch up after the input ends
ROOT = Path(__file__).resolve().parents[1]
TICK = 0.005  # the producer sends what is due every 5 ms
PARTS = ("triggerExecution", "latestOffset", "queryPlanning", "walCommit", "addBatch",
         "commitOffsets")  # fmt: skip


# -- the producer --------------------------------------------------------------------------


def produce(url: str, rate: int, seconds: float) -> tuple[int, float]:
    """Append ``rate`` entries a second for ``seconds``; returns (entries, start as
    epoch seconds). Entries due in a 5 ms tick go out in one pipeline."""
    client = redis.Redis.from_url(url)
    rng = random.Random(7)
    start_wall, start = time.time(), time.perf_counter()
    sent = 0
    total = int(rate * seconds)
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        if due > sent:
            pipe = client.pipeline(transaction=False)
            stamp = repr(time.time())
            for order in range(sent, due):
                pipe.execute_command("XADD", SOURCE, "*", "order_id", order, "user_id",
                                     rng.randrange(KEYS), "amount", "9.5", "ts", stamp)  # fmt: skip
            pipe.execute()
            sent = due
        pause = start + (sent / rate) - time.perf_counter()
        time.sleep(max(TICK, pause) if pause > 0 else 0)
    client.set(PRODUCED, sent)
    client.close()
    return sent, start_wall


def measure(url: str, produced: int, start: float) -> dict[str, Any]:
    """Latencies (ms) of the output entries, after and within the first 10 s of input,
    and the exactly-once count."""
    client = redis.Redis.from_url(url)
    client.set_response_callback("XRANGE", lambda r, **_: r)
    early: list[float] = []
    late: list[float] = []
    orders: set[int] = set()
    count = 0
    after = "-"
    while True:
        page = client.xrange(OUTPUT, after, "+", count=10_000)
        for entry_id, flat in page:
            fields = dict(zip(flat[0::2], flat[1::2], strict=True))
            stamp = float(fields[b"ts"])
            latency = int(entry_id.split(b"-")[0]) - stamp * 1000
            (early if stamp - start < FIRST else late).append(latency)
            orders.add(int(fields[b"order_id"]))
            count += 1
        if len(page) < 10_000:
            break
        after = "(" + page[-1][0].decode()
    client.close()
    return {
        "produced": produced,
        "out": count,
        "duplicates": count - len(orders),
        "lost": produced - len(orders & set(range(produced))),
        "p50": float(np.percentile(late, 50)) if late else float("nan"),
        "p99": float(np.percentile(late, 99)) if late else float("nan"),
        "first_p99": float(np.percentile(early, 99)) if early else float("nan"),
    }


def reset(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.delete(SOURCE, OUTPUT, PRODUCED)
    keys = list(client.scan_iter("enrich:sink:*", count=10_000))
    if keys:
        client.delete(*keys)
    client.close()


def child(args: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ)
    paths = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return subprocess.Popen([sys.executable, "-m", "benchmarks._latency_runs", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip


def wait_ready(process: subprocess.Popen[str], what: str) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == "READY":
            return
    raise RuntimeError(f"{what} ended before it was ready (exit {process.wait()})")


def run_path(url: str, path: str, rate: int) -> dict[str, Any]:
    """One run: the consumer(s) of ``path`` started and ready, then the input."""
    reset(url)
    if path == "hand":
        client = redis.Redis.from_url(url)
        client.xgroup_create(SOURCE, "hand", id="0", mkstream=True)
        client.close()
        workers = [child(["--hand", url, str(i)]) for i in range(2)]
        for worker in workers:
            wait_ready(worker, "a hand-written consumer")
        produced, start = produce(url, rate, SECONDS)
        _await_output(url, produced)
        for worker in workers:
            worker.terminate()
            worker.wait()
        return {**measure(url, produced, start), "batches": {}}
    job = child(["--spark", url, path])
    wait_ready(job, f"the {path} query")
    produced, start = produce(url, rate, SECONDS)
    out, _ = job.communicate(timeout=DRAIN + 120)
    if job.returncode != 0:
        raise RuntimeError(f"the {path} query failed (exit {job.returncode})")
    batches = json.loads(out.strip().splitlines()[-1])
    return {**measure(url, produced, start), "batches": batches}


def backlog_path(url: str, path: str, rows: int) -> dict[str, Any]:
    """One run over a backlog: ``rows`` entries in the source before the consumer starts;
    the seconds from its start to its last output entry (a Spark path: from building the
    query, warm-up included, in a session already started; the hand-written consumers:
    from starting their processes). Returns rows/s, seconds, and the exactly-once count."""
    reset(url)
    fill(url, rows)
    client = redis.Redis.from_url(url)
    client.set(PRODUCED, rows)
    if path == "hand":
        client.xgroup_create(SOURCE, "hand", id="0")
    client.close()
    if path == "hand":
        started = time.perf_counter()
        workers = [child(["--hand", url, str(i)]) for i in range(2)]
        _await_output(url, rows, poll=0.01)
        seconds = time.perf_counter() - started
        for worker in workers:
            worker.terminate()
            worker.wait()
        batches: dict[str, Any] = {}
    else:
        job = child(["--backlog", url, path])
        out, _ = job.communicate(timeout=DRAIN + 300)
        if job.returncode != 0:
            raise RuntimeError(f"the {path} query failed (exit {job.returncode})")
        batches = json.loads(out.strip().splitlines()[-1])
        seconds = batches["seconds"]
    result = measure(url, rows, 0.0)
    return {"rows_per_s": rows / seconds, "seconds": seconds, "lost": result["lost"],
            "duplicates": result["duplicates"], "batches": batches}  # fmt: skip


def fill(url: str, rows: int) -> None:
    """``rows`` orders in the source stream, in pipelines of 5,000."""
    client = redis.Redis.from_url(url)
    rng = random.Random(11)
    stamp = repr(time.time())
    for start in range(0, rows, 5_000):
        pipe = client.pipeline(transaction=False)
        for order in range(start, min(rows, start + 5_000)):
            pipe.execute_command("XADD", SOURCE, "*", "order_id", order, "user_id",
                                 rng.randrange(KEYS), "amount", "9.5", "ts", stamp)  # fmt: skip
        pipe.execute()
    client.close()


def _await_output(url: str, produced: int, poll: float = 0.1) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + DRAIN
    while client.xlen(OUTPUT) < produced and time.monotonic() < deadline:
        time.sleep(poll)
    client.close()


# -- the consumers -------------------------------------------------------------------------

# Settings tried beside the switch (ENRICH_BENCH_LATENCY_PATHS=low,low-pipelined,...):
# Spark's opt-in pipelined transfer to Python workers, one partition a batch.
EXPLORED: dict[str, dict[str, dict[str, Any]]] = {
    "low-separate": {"profile": {"join_in_sink": False}},
    "low-pipelined": {"conf": {"spark__python__udf__pipelined__enabled": "true"}},
    "low-1part": {"source": {"partitionsPerStream": "1"}},
    "low-tasks": {"profile": {"publish_from": "tasks"}},
    # the plain sink keyed by the source record, each task publishing its rows
    "defaults-tasks": {"sink": {"sourceIdColumn": "stream_id", "publishFrom": "tasks"}},
}


def spark_main(url: str, path: str, backlog: bool = False) -> None:
    """A Spark path in this process: start the query, say READY once it waits for data,
    run until the output holds every entry the parent produced, print the progress.
    ``backlog``: the input is all there before the query starts; the seconds from the
    query's construction (warm-up included) to the last output entry are printed too."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join, low_latency, register_data_sources

    from .spark import SCHEMA as USER_SCHEMA, start_spark

    extra = EXPLORED.get(path, {}).get("conf", {})
    if extra:  # start_spark's session with the setting tried: getOrCreate keeps it
        from enrich.spark import session

        session("enrich-bench", master="local[2]", spark__ui__enabled="false",
                spark__sql__shuffle__partitions="2", spark__default__parallelism="2",
                spark__python__worker__reuse="true", spark__driver__memory="2g",
                **extra)  # fmt: skip
    spark = start_spark()
    register_data_sources(spark)
    began = time.perf_counter()
    users = RedisLookup(url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    source = spark.readStream.format("redis-stream").option("url", url)
    source = source.options(**EXPLORED.get(path, {}).get("source", {}))
    orders = source.option("stream", SOURCE).schema(SCHEMA).load()
    enriched = lookup_join(orders, users, on="user_id")
    checkpoint = Path(os.environ.get("TMPDIR", "/tmp")) / f"enrich-latency-{os.getpid()}"
    if path.startswith("defaults"):
        writer = enriched.writeStream.format("redis")
        writer = writer.options(**EXPLORED.get(path, {}).get("sink", {}))
    else:
        profile = EXPLORED.get(path, {}).get("profile", {})
        writer = low_latency(enriched, warm=path != "low-cold", **profile)
    query = (writer.option("url", url).option("stream", OUTPUT)
             .option("checkpointLocation", str(checkpoint)).start())  # fmt: skip
    while not backlog and "Waiting for data" not in query.status["message"]:
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        time.sleep(0.05)
    print("READY", flush=True)
    client = redis.Redis.from_url(url)
    deadline = None
    while True:
        produced = client.get(PRODUCED)
        if produced is not None:
            deadline = deadline or time.monotonic() + DRAIN
            if client.xlen(OUTPUT) >= int(produced) or time.monotonic() > deadline:
                break
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        time.sleep(0.01 if backlog else 0.1)
    seconds = time.perf_counter() - began
    if backlog:  # the last batch's progress comes after its commit
        query.processAllAvailable()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    spark.stop()
    parts = {
        name: statistics.median(p["durationMs"].get(name, 0) for p in progress)
        for name in PARTS
    } if progress else {}  # fmt: skip
    parts["rows"] = statistics.median(p["numInputRows"] for p in progress) if progress else 0
    parts["batches"] = len(progress)
    parts["first"] = [p["durationMs"]["triggerExecution"] for p in progress[:3]]
    parts["seconds"] = seconds
    print(json.dumps(parts), flush=True)


def hand_main(url: str, name: str) -> None:
    """One of the hand-written consumers: XREADGROUP, MGET, XADD, XACK until killed."""
    import orjson

    client = redis.Redis.from_url(url)
    client.set_response_callback("XREADGROUP", lambda r, **_: r)
    print("READY", flush=True)
    while True:
        reply = client.xreadgroup("hand", name, {SOURCE: ">"}, count=1000, block=100)
        if not reply:
            continue
        # RESP3 (redis-py 8's default) answers a map of streams, RESP2 a list of pairs
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        fields = [dict(zip(flat[0::2], flat[1::2], strict=True)) for _, flat in entries]
        values = client.mget([b"user:" + f[b"user_id"] for f in fields])
        pipe = client.pipeline(transaction=False)
        for (entry_id, _), f, raw in zip(entries, fields, values, strict=True):
            user = orjson.loads(raw) if raw is not None else {}
            row = {"stream_id": entry_id, **f}
            for key in ("name", "tier", "credit"):
                if user.get(key) is not None:
                    row[key.encode()] = str(user[key])
            pipe.execute_command("XADD", OUTPUT, "*", *[x for kv in row.items() for x in kv])
        pipe.xack(SOURCE, "hand", *[entry_id for entry_id, _ in entries])
        pipe.execute()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--spark":
        spark_main(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--backlog":
        spark_main(sys.argv[2], sys.argv[3], backlog=True)
    elif len(sys.argv) == 4 and sys.argv[1] == "--hand":
        hand_main(sys.argv[2], f"c{sys.argv[3]}")
