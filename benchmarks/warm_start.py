"""A worker that starts warm (issue 43): Spark's Python workers forked from
``enrich.spark.session`` against the stock ``pyspark.daemon``, side by side in one run.

Each measure is a fresh driver process (the daemon module is read when the SparkContext
starts), the variants taking turns (in order, then reversed...): ``warm``, the session
helper's defaults (its warm daemon, and its warm start: the query's Python processes
started in the background as the session starts); ``daemon``, the warm daemon without
the warm start; ``stock``, ``pyspark.daemon`` without either:

* ``defaults``: ``redis-stream -> lookup_join -> redis`` on the defaults, 2,000 entries
  waiting in the source: seconds from ``start()`` to the first output entry (the
  session already started, and, under the warm start, the query's processes in it), and
  from the call of ``session()`` to that entry (``session_to_row_s``: all the user waits);
* ``low``: the same under ``low_latency()``: seconds of its warm-up (inside
  ``low_latency()``), then from ``start()`` to the first output entry;
* ``worker``: a first ``mapInArrow`` job on 2 fresh workers whose function imports what
  the join's worker imports: the job's seconds, and in each worker the milliseconds from
  its fork to its first batch (``/proc/self/stat``'s start time) and the import's own.

``ENRICH_BENCH_WARM_ROUNDS`` (default 1) sets the rounds, ``ENRICH_BENCH_WARM_KINDS``
the measures (``defaults,low,worker``), ``ENRICH_BENCH_WARM_VARIANTS`` the variants
(``warm,daemon,stock``). Run: ``./scripts/dev bench warm_start`` (or ``python -m
benchmarks warm_start``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from ._latency_runs import OUTPUT, SCHEMA, SOURCE, fill, reset
from ._report import table, write

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("ENRICH_BENCH_WARM_ROUNDS", 1))
KINDS = os.environ.get("ENRICH_BENCH_WARM_KINDS", "defaults,low,worker").split(",")
VARIANTS = tuple(os.environ.get("ENRICH_BENCH_WARM_VARIANTS", "warm,daemon,stock").split(","))
LABELS = {
    "warm": "enrich.spark.session (the defaults: warm daemon, warm start)",
    "daemon": "enrich.spark.session (its defaults: warm_start=False)",
    "stock": "pyspark.daemon, warm_start=False",
}
ENTRIES = 2_000
LIMIT = 180.0  # seconds a child may wait for its first output entry


def _uptime() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def child_main(url: str, kind: str, variant: str) -> None:
    """One measure in this (fresh) process; prints one JSON line."""
    from enrich.spark import session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    began = time.perf_counter()
    spark = session(
        "enrich-warm-bench", "local[2]", warm_workers=variant != "stock",
        warm_start=variant == "warm",
        spark__ui__enabled="false", spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions="2", spark__default__parallelism="2",
        spark__python__worker__reuse="true", spark__driver__memory="1g",
        # a Python process's connect-back under load (15 s by default; missed at load 18)
        spark__python__authenticate__socketTimeout="120s",
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"session_s": time.perf_counter() - began, "load": os.getloadavg()[0]}
    if kind == "worker":
        out |= _first_job(spark)
    else:
        out |= _first_row(spark, url, kind)
        # what the user waits in all: the session, building the query, its first row
        out["session_to_row_s"] = out.pop("row_at") - began
    spark.stop()
    print(json.dumps(out), flush=True)


def _first_row(spark: Any, url: str, kind: str) -> dict[str, Any]:
    from benchmarks.spark import SCHEMA as USER_SCHEMA
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join, low_latency, register_data_sources

    register_data_sources(spark)
    users = RedisLookup(url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    orders = (spark.readStream.format("redis-stream").option("url", url)
              .option("stream", SOURCE).schema(SCHEMA).load())  # fmt: skip
    enriched = lookup_join(orders, users, on="user_id")
    checkpoint = Path(os.environ.get("TMPDIR", "/tmp")) / f"enrich-warm-{os.getpid()}"
    began = time.perf_counter()
    writer = enriched.writeStream.format("redis") if kind == "defaults" else low_latency(enriched)
    warmed = time.perf_counter() - began
    query = (writer.option("url", url).option("stream", OUTPUT)
             .option("checkpointLocation", str(checkpoint)).start())  # fmt: skip
    started = time.perf_counter()
    client = redis.Redis.from_url(url)
    while client.xlen(OUTPUT) == 0 and time.perf_counter() - started < LIMIT:
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        time.sleep(0.01)
    row_at = time.perf_counter()
    query.stop()
    client.close()
    return {"prepare_s": warmed, "first_row_s": row_at - started, "row_at": row_at}


def _first_job(spark: Any) -> dict[str, Any]:
    def probe(batches: Any) -> Any:
        import pyarrow as pa

        now = time.time()
        with open("/proc/self/stat") as stat:  # field 22: start, in ticks after boot
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as boot:
            btime = next(int(x.split()[1]) for x in boot if x.startswith("btime"))
        age = now - (btime + ticks / os.sysconf("SC_CLK_TCK"))
        t = time.perf_counter()
        import enrich.spark.join.join_batches  # noqa: F401  (what the join's worker imports)

        imported = time.perf_counter() - t
        mod = sys.modules.get("enrich.spark.session")
        for batch in batches:
            n = batch.num_rows
            yield pa.RecordBatch.from_pydict({
                "id": batch.column(0), "age": [age] * n, "imported": [imported] * n,
                "warm": [bool(mod and mod.WARM)] * n,
            })  # fmt: skip

    began = time.perf_counter()
    schema = "id long, age double, imported double, warm boolean"
    rows = spark.range(2, numPartitions=2).mapInArrow(probe, schema).collect()
    return {
        "job_s": time.perf_counter() - began,
        "fork_to_batch_ms": statistics.mean(r.age for r in rows) * 1000,
        "import_ms": statistics.mean(r.imported for r in rows) * 1000,
        "warm_seen": all(r.warm for r in rows),
    }


def run_child(url: str, kind: str, variant: str) -> dict[str, Any]:
    if kind != "worker":
        reset(url)
        fill(url, ENTRIES)
    env = dict(os.environ)
    paths = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    args = [sys.executable, "-m", "benchmarks.warm_start", "--child", url, kind, variant]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=LIMIT + 240)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{kind} {variant} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from enrich.demo.local import local_redis

    from .lookup import load_users

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with local_redis() as url:
        load_users(url)
        for n in range(ROUNDS):
            for kind in KINDS:
                turn = VARIANTS if n % 2 == 0 else VARIANTS[::-1]
                for variant in turn:
                    result = run_child(url, kind, variant)
                    print(f"  {kind} {variant}: {result} ({_uptime()})", flush=True)
                    runs.setdefault((kind, variant), []).append(result)
    rows = []
    order = {v: i for i, v in enumerate(VARIANTS)}
    for (kind, variant), results in sorted(
        runs.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])
    ):
        keys = [k for k in results[0] if k not in ("load", "warm_seen")]
        cells = ", ".join(f"{k} {statistics.median(r[k] for r in results):.2f}" for k in keys)
        loads = "-".join(f"{r['load']:.1f}" for r in results)
        rows.append([kind, LABELS[variant], cells, loads])
    heading = f"{when}, {ROUNDS} round(s), medians; {_uptime()} at the end"
    text = table(["measure", "daemon", "figures", "load at start"], rows)
    write("warm_start", "A worker that starts warm", [(heading, text)])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
