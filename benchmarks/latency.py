"""End-to-end latency of a streaming job at a steady input rate, exactly once, side by side.

A producer (this process) appends orders to a Redis stream at a steady rate, stamping
each entry with the wall clock (``ts``, seconds). The job enriches each order from Redis
(100,000 users, JSON values) and appends it to an output stream; an output entry's id is
the same machine's clock when the sink's commit wrote it, so its latency is that id's
milliseconds minus the stamp. Paths, each in a process of its own (a fresh Spark for each
Spark path, so none inherits another's warm workers), on local[2]:

  (defaults) ``redis-stream`` -> ``lookup_join`` -> ``redis`` sink, every option at its
  default (transactional, keyed by batch id; Spark's default trigger);
  (low) the same under the one switch: :func:`enrich.spark.low_latency` (async progress
  tracking, the sink keyed by each row's ``stream_id``, trigger 0, workers warmed up);
  (low, no warm-up) the switch with ``warm=False`` (at 10,000/s only): what the warm-up buys;
  (hand) what a user writes without Spark: two Python processes in a consumer group
  (``XREADGROUP`` pages of 1,000, ``MGET`` of their users, orjson, an ``XADD`` pipeline,
  ``XACK``): at-least-once.

A Spark path's producer starts once its query waits for data (its source is planned;
Python workers and the sink's first commit are still to start): "the first 10 s" are the
entries stamped in the producer's first 10 seconds. Every entry must come out exactly
once (counted, duplicates by ``order_id``). Per Spark path the table gives the median
micro-batch (``durationMs``) and its parts, from the query's progress.

Rerun: ``./scripts/dev bench latency`` (``ENRICH_BENCH_LATENCY_RATES=2000,10000`` and
``ENRICH_BENCH_LATENCY_SECONDS=30`` set the rates and the seconds of input per run).
"""

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

from ._report import table, write
from .lookup import KEYS, load_users

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
    return subprocess.Popen([sys.executable, "-m", "benchmarks.latency", *args], cwd=ROOT,
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


def _await_output(url: str, produced: int) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + DRAIN
    while client.xlen(OUTPUT) < produced and time.monotonic() < deadline:
        time.sleep(0.1)
    client.close()


# -- the consumers -------------------------------------------------------------------------


def spark_main(url: str, path: str) -> None:
    """A Spark path in this process: start the query, say READY once it waits for data,
    run until the output holds every entry the parent produced, print the progress."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join, low_latency, register_data_sources

    from .spark import SCHEMA as USER_SCHEMA, start_spark

    spark = start_spark()
    register_data_sources(spark)
    users = RedisLookup(url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    source = spark.readStream.format("redis-stream").option("url", url)
    orders = source.option("stream", SOURCE).schema(SCHEMA).load()
    enriched = lookup_join(orders, users, on="user_id")
    checkpoint = Path(os.environ.get("TMPDIR", "/tmp")) / f"enrich-latency-{os.getpid()}"
    if path == "defaults":
        writer = enriched.writeStream.format("redis")
    else:
        writer = low_latency(enriched, warm=path == "low")
    query = (writer.option("url", url).option("stream", OUTPUT)
             .option("checkpointLocation", str(checkpoint)).start())  # fmt: skip
    while "Waiting for data" not in query.status["message"]:
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
        time.sleep(0.1)
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    spark.stop()
    parts = {
        name: statistics.median(p["durationMs"].get(name, 0) for p in progress)
        for name in PARTS
    } if progress else {}  # fmt: skip
    parts["rows"] = statistics.median(p["numInputRows"] for p in progress) if progress else 0
    parts["batches"] = len(progress)
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
        entries = reply[0][1]
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


# -- the report ----------------------------------------------------------------------------

LABELS = {
    "defaults": "redis-stream -> lookup_join -> redis sink (defaults)",
    "low": "the same, low_latency() (the one switch)",
    "low-cold": "the same, low_latency(warm=False)",
    "hand": "hand-written: 2 processes, XREADGROUP/MGET/XADD (at-least-once)",
}


def main() -> None:
    from enrich.demo.local import local_redis

    started = time.perf_counter()
    results: list[tuple[int, str, dict[str, Any], float]] = []
    with local_redis() as url:
        load_users(url)
        for rate in RATES:
            paths = ["defaults", "low", "hand"]
            if rate == TARGET_RATE:
                paths.insert(2, "low-cold")
            for path in paths:
                load = os.getloadavg()[0]
                print(f"latency: {path} at {rate:,}/s (load {load:.1f})", flush=True)
                results.append((rate, path, run_path(url, path, rate), load))
    rows = []
    for rate, path, r, load in results:
        once = "yes" if r["lost"] == 0 and r["duplicates"] == 0 else (
            f"no: {r['lost']} lost, {r['duplicates']} doubled")  # fmt: skip
        b = r["batches"]
        batch = f"{b['triggerExecution']:.0f} ms, {b['rows']:.0f} rows" if b else "-"
        rows.append([f"{rate:,}", LABELS[path], r["produced"], once, r["p50"], r["p99"],
                     r["first_p99"], batch, f"{load:.1f}"])  # fmt: skip
    main_table = table(
        ["entries/s", "path", "entries", "exactly once", "p50 ms (after 10 s)",
         "p99 ms (after 10 s)", "p99 ms (first 10 s)", "median micro-batch", "load"],
        rows,
    )  # fmt: skip
    parts_rows = [
        [f"{rate:,}", path, *(f"{r['batches'].get(p, 0):.0f}" for p in PARTS),
         r["batches"].get("batches", 0)]
        for rate, path, r, _ in results if r["batches"]
    ]  # fmt: skip
    parts_table = table(["entries/s", "path", *(f"{p} ms" for p in PARTS), "batches"],
                        parts_rows)  # fmt: skip
    target = next((r for rate, path, r, _ in results if rate == TARGET_RATE and path == "low"),
                  None)  # fmt: skip
    verdict = "no run at 10,000/s"
    if target is not None:
        checks = [
            ("p50 after 10 s <= 300 ms", target["p50"], target["p50"] <= 300),
            ("p99 after 10 s <= 600 ms", target["p99"], target["p99"] <= 600),
            ("p99 of the first 10 s <= 1,500 ms", target["first_p99"],
             target["first_p99"] <= 1500),
            ("every entry exactly once", f"{target['lost']} lost, {target['duplicates']} doubled",
             target["lost"] == 0 and target["duplicates"] == 0),
        ]  # fmt: skip
        verdict = table(
            ["target (10,000/s, the one switch)", "measured", "met"],
            [[name, value, "yes" if ok else "no"] for name, value, ok in checks],
        )
    path = write(
        "latency",
        "End-to-end latency at a steady rate: redis-stream -> lookup_join -> redis sink",
        [
            (f"local[2], {SECONDS:.0f} s of input per run", main_table),
            ("Median micro-batch by part (durationMs, batches with rows)", parts_table),
            ("Targets (issue 34)", verdict),
        ],
        notes=(__doc__ or "").split("\n\n", 1)[1],
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--spark":
        spark_main(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--hand":
        hand_main(sys.argv[2], f"c{sys.argv[3]}")
    else:
        main()
