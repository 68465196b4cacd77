"""Where a cold query's first seconds go (issue 43): a timeline of every Python process.

One fresh driver per run (``enrich.spark.session()`` on local[2], the warm daemon on),
``redis-stream -> lookup_join -> redis`` on the defaults (``defaults``: 2,000 entries
waiting, ``start()`` to the first output entry; ``backlog``: 300,000 entries waiting,
``start()`` to the last), or under ``low_latency()`` (``low``). Every Python process
Spark starts loads ``benchmarks/start_trace_site/sitecustomize.py`` (on ``PYTHONPATH``),
which appends its start, forks, outermost imports and the calls of the source's and the
sink's methods and of each worker module's ``main`` to one file; the driver adds its own
marks. The summary lists each process with its times relative to ``start()``.

Run: ``python -m benchmarks.start_trace [defaults|low|backlog] ...`` (default:
``defaults``); ``ENRICH_START_TRACE_KEEP=path`` keeps the raw trace;
``ENRICH_START_TRACE_FORK=0`` runs without the session's fork server (Spark starts each
Python process as a fresh interpreter, as before it), ``ENRICH_START_TRACE_WARM=0``
without the warm daemon, ``ENRICH_START_TRACE_ARCHIVE=0`` without the driver JVM's
class-data archive. A process forked by the fork server shows the server's command
line (``-m .../s``): its start and imports are the server's, done before ``start()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import redis

from ._latency_runs import OUTPUT, SCHEMA, SOURCE, fill, reset

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "benchmarks" / "start_trace_site"
ENTRIES = {"defaults": 2_000, "low": 2_000, "backlog": 300_000}
LIMIT = 240.0


def mark(name: str, **fields: Any) -> None:
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "event": "mark", "name": name,
                       **fields})  # fmt: skip
    with open(os.environ["ENRICH_START_TRACE"], "a") as out:
        out.write(line + "\n")


def child_main(url: str, kind: str) -> None:
    from enrich.spark import session

    mark("session")
    spark = session(
        "enrich-start-trace", "local[2]",
        spark__ui__enabled="false", spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions="2", spark__default__parallelism="2",
        spark__python__worker__reuse="true", spark__driver__memory="2g",
        warm_workers=os.environ.get("ENRICH_START_TRACE_WARM", "1") == "1",
        fork_server=os.environ.get("ENRICH_START_TRACE_FORK", "1") == "1",
        class_archive=os.environ.get("ENRICH_START_TRACE_ARCHIVE", "1") == "1",
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    mark("session ready")
    from benchmarks.spark import SCHEMA as USER_SCHEMA
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join, low_latency, register_data_sources

    register_data_sources(spark)
    users = RedisLookup(url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    mark("build")
    orders = (spark.readStream.format("redis-stream").option("url", url)
              .option("stream", SOURCE).schema(SCHEMA).load())  # fmt: skip
    enriched = lookup_join(orders, users, on="user_id")
    checkpoint = Path(os.environ.get("TMPDIR", "/tmp")) / f"enrich-trace-{os.getpid()}"
    writer = low_latency(enriched) if kind == "low" else enriched.writeStream.format("redis")
    mark("writer ready")
    query = (writer.option("url", url).option("stream", OUTPUT)
             .option("checkpointLocation", str(checkpoint)).start())  # fmt: skip
    mark("start() returned")
    client = redis.Redis.from_url(url)
    want = 1 if kind != "backlog" else ENTRIES[kind]
    began = time.perf_counter()
    first = False
    while time.perf_counter() - began < LIMIT:
        n = client.xlen(OUTPUT)
        if n and not first:
            mark("first output entry")
            first = True
        if n >= want:
            break
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        time.sleep(0.005)
    mark("last output entry" if kind == "backlog" else "done", rows=client.xlen(OUTPUT))
    query.processAllAvailable()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    mark("progress", batches=[{"rows": p["numInputRows"], **p["durationMs"]} for p in progress])
    query.stop()
    spark.stop()


def _label(argv: list[str], forked: bool) -> str:
    # sys.argv as a process's site-packages saw it: ``-m`` and the daemon's argument
    # (the worker module), not the daemon module itself
    text = " ".join(argv)
    for word in ("plan_data_source_read", "lookup_data_sources", "create_data_source",
                 "python_streaming_sink_runner", "python_streaming_source_runner",
                 "commit_data_source_write", "write_into_data_source"):  # fmt: skip
        if word in text:
            return word
    if "pyspark.worker" in text:
        return "executor worker" if forked else "executor daemon"
    if "--child" in text:
        return "driver" if not forked else "driver fork"
    if text == "-m":
        return "python_streaming_source_runner (no daemon)"
    return text[:60]


def summarise(path: Path) -> str:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    zero = next(e["t"] for e in events if e.get("name") == "start() returned")
    procs: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"imports": 0.0, "calls": [], "argv": None, "forked": False}
    )
    for e in events:
        p = procs[e["pid"]]
        p.setdefault("first", e["t"])
        p["last"] = e["t"]
        if e["event"] == "start":
            p["argv"] = e["argv"]
            p["born"] = e["born"]
        elif e["event"] == "fork":
            p["forked"] = True
            p["born"] = e["t"]
            p["argv"] = procs[e["ppid"]]["argv"]
        elif e["event"] == "import" and e["depth"] == 0:
            p["imports"] += e["s"]
            p.setdefault("big", []).append((e["s"], e["name"]))
        elif e["event"] == "call" and e["phase"] == "exit":
            p["calls"].append((e["t"] - e["s"] - zero, e["s"], e["name"]))
    lines = ["marks (s after start() returned):"]
    for e in events:
        if e["event"] == "mark" and e["name"] != "progress":
            lines.append(f"  {e['t'] - zero:+8.2f}  {e['name']}")
        elif e["event"] == "mark":
            lines.append(f"  progress: {e['batches']}")
    lines.append("processes (born, imports s, calls: start+seconds name):")
    for pid, p in sorted(procs.items(), key=lambda kv: kv[1].get("born", kv[1]["first"])):
        label = _label(p["argv"] or [], p["forked"])
        big = ", ".join(f"{n} {s:.2f}" for s, n in sorted(p.get("big", []), reverse=True)[:4])
        lines.append(
            f"  pid {pid} {label}: born {p.get('born', p['first']) - zero:+.2f}, "
            f"last {p['last'] - zero:+.2f}, imports {p['imports']:.2f} s ({big})"
        )
        for at, took, name in p["calls"]:
            lines.append(f"      {at:+8.2f} {took:6.3f} s  {name}")
    return "\n".join(lines)


def run(url: str, kind: str) -> str:
    reset(url)
    fill(url, ENTRIES[kind])
    trace = Path(os.environ.get("ENRICH_START_TRACE_KEEP") or
                 tempfile.mktemp(prefix="enrich-start-trace-", suffix=".jsonl"))  # fmt: skip
    trace.unlink(missing_ok=True)
    env = dict(os.environ)
    paths = [str(SITE), str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["ENRICH_START_TRACE"] = str(trace)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    args = [sys.executable, "-m", "benchmarks.start_trace", "--child", url, kind]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=LIMIT + 240)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{kind} failed: {done.stderr[-3000:]}")
    return summarise(trace)


def main(kinds: list[str]) -> None:
    from enrich.demo.local import local_redis

    from .lookup import load_users

    with local_redis() as url:
        load_users(url)
        for kind in kinds:
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            print(f"== {kind}, {when}, load {load}", flush=True)
            print(run(url, kind), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:] or ["defaults"])
