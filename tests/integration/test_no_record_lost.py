"""The invariant of the join, end to end: no record is lost.

A run mixing hits, 1:N hits, misses, null keys, HTTP errors, undecodable bodies and
timeouts yields, for a left join with an error column, exactly one output per input row
(one per match for 1:N) in input order; an inner join dropping errors yields exactly the
hits, and its metrics account for every row it dropped.

The slow keys never answer within a test; their rows' timeouts run on a gated clock that
lets a timer fire only while no other key is in flight (``tests.support.gated_clock``), so
on a busy machine a hit, a miss or an error can be late but never turns into a timeout.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from enrich import JoinMetrics, chunk_rows, lookup_chunks, lookup_rows
from tests.integration.conftest import MakeHttp
from tests.support.gated_clock import GatedClock, OpenWhileOnlySlow
from tests.support.http_server import HttpTestServer

TIMEOUT = 1.0  # per-record timeout, on the gated clock
CAPACITY = 200
REQUEST_TIMEOUT = 300.0  # the connector's own: out of the way (the slow keys never answer)
SLOW = {f"slow{n}" for n in range(3)}


def script(server: HttpTestServer) -> dict[str, str]:
    """Forty keys of each kind, scripted on the server; key -> its kind."""
    kinds: dict[str, str] = {}
    for n in range(40):
        kinds[f"hit{n}"] = "hit"
        server.data[f"hit{n}"] = {"name": f"H{n}", "age": n}
        kinds[f"many{n}"] = "many"
        server.data[f"many{n}"] = [{"name": f"M{n}", "age": 1}, {"name": f"M{n}", "age": 2}]
        kinds[f"miss{n}"] = "miss"
        kinds[f"e{n}"] = "error"
        server.fail(f"e{n}", 500 if n % 2 else 400)
        kinds[f"bad{n}"] = "decode"
        server.malformed.add(f"bad{n}")
    for key in SLOW:
        kinds[key] = "timeout"
        server.latency[key] = 600.0  # never, within a test
    return kinds


def gated_source(make_http: MakeHttp) -> tuple[OpenWhileOnlySlow, GatedClock]:
    clock = GatedClock()
    return OpenWhileOnlySlow(make_http(timeout=REQUEST_TIMEOUT), clock, SLOW), clock


def mixed_rows(kinds: dict[str, str], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` rows of random keys (and null keys); about one in 100 is slow."""
    rng = random.Random(seed)
    keys = [*sorted(k for k in kinds if kinds[k] != "timeout"), None]
    slow = sorted(k for k in kinds if kinds[k] == "timeout")
    return [
        {"i": i, "uid": rng.choice(slow if rng.random() < 0.01 else keys)} for i in range(count)
    ]


def test_left_join_with_error_column_yields_every_row_in_order(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    kinds = script(http_server)
    data = mixed_rows(kinds, 1000, seed=1)
    # One key per request, so that a slow key holds up no other key.
    source, clock = gated_source(make_http)
    it = lookup_rows(
        data, source, on="uid", on_error="error_column", timeout=TIMEOUT, max_batch=1,
        capacity=CAPACITY, clock=clock,
    )  # fmt: skip
    out = list(it)
    expected: list[tuple[int, str | None, str | None]] = []
    for row in data:
        kind = kinds.get(row["uid"]) if row["uid"] is not None else "null"
        n = row["uid"][len(row["uid"].rstrip("0123456789")) :] if row["uid"] else ""
        if kind == "hit":
            expected.append((row["i"], f"H{n}", None))
        elif kind == "many":
            expected += [(row["i"], f"M{n}", None)] * 2
        elif kind in ("miss", "null"):
            expected.append((row["i"], None, None))
        else:
            expected.append((row["i"], None, kind))
    assert {kinds[r["uid"]] for r in data if r["uid"]} == set(kinds.values())  # all kinds
    reason = {"error": "status:", "decode": "decode: ", "timeout": "timeout: "}
    got = []
    for r in out:
        error = r["enrich_error"]
        kind = next((k for k, p in reason.items() if error and error.startswith(p)), error)
        got.append((r["i"], r["name"], kind))
    assert got == expected
    assert {r["i"] for r in out} == set(range(len(data)))  # and every input is there


def run_inner_drop(
    data: list[dict[str, Any]], make_http: MakeHttp
) -> tuple[list[tuple[int, str]], JoinMetrics]:
    """An inner join dropping errors, through ``lookup_chunks`` to read the join's metrics."""
    size = chunk_rows(CAPACITY)
    chunks = [
        (data[i : i + size], [row["uid"] for row in data[i : i + size]])
        for i in range(0, len(data), size)
    ]
    source, clock = gated_source(make_http)
    it = lookup_chunks(
        chunks, source, how="inner", on_error="drop", timeout=TIMEOUT, max_batch=1,
        capacity=CAPACITY, clock=clock,
    )  # fmt: skip
    out = [(chunk.tag[i]["i"], chunk.tag[i]["uid"]) for chunk in it for i in chunk.indices]
    return out, it.function.statistics()


def test_inner_join_dropping_errors_yields_the_hits_and_counts_every_drop(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    kinds = script(http_server)
    data = [row for row in mixed_rows(kinds, 1000, seed=2) if row["uid"] is not None]
    out, stats = run_inner_drop(data, make_http)
    of_kind = Counter(kinds[row["uid"]] for row in data)
    assert all(of_kind[k] > 0 for k in ("hit", "many", "miss", "error", "decode", "timeout"))
    hits = [
        (row["i"], row["uid"])
        for row in data
        for _ in range({"hit": 1, "many": 2}.get(kinds[row["uid"]], 0))
    ]
    assert out == hits
    assert (stats.rows_in, stats.rows_out) == (len(data), len(hits))
    assert stats.misses == of_kind["miss"]
    assert stats.timeouts == of_kind["timeout"]
    statuses = Counter(f"status:{http_server_status(row['uid'])}" for row in data
                       if kinds[row["uid"]] == "error")  # fmt: skip
    assert stats.errors == Counter(
        {**statuses, "decode": of_kind["decode"], "timeout": of_kind["timeout"]}
    )
    # Every input row is accounted for: joined, a miss, or an error.
    joined = of_kind["hit"] + of_kind["many"]
    assert stats.rows_in == joined + stats.misses + sum(stats.errors.values())


def http_server_status(key: str) -> int:
    return 500 if int(key[1:]) % 2 else 400


def test_metrics_account_for_rows_with_a_null_key_dropped_by_an_inner_join(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.data["hit0"] = {"name": "H0", "age": 0}
    data = [{"i": 0, "uid": "hit0"}, {"i": 1, "uid": None}, {"i": 2, "uid": "nobody"}]
    out, stats = run_inner_drop(data, make_http)
    assert out == [(0, "hit0")]
    assert stats.rows_in == 3
    assert stats.null_keys == 1
    assert stats.rows_in == (
        stats.rows_out + stats.misses + stats.null_keys + sum(stats.errors.values())
    )
