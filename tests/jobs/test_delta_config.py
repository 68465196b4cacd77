"""A job's Delta sink, checked where the config is read (no Spark, no Delta needed): its
table's path, Delta's output modes and option names, Delta's transaction keys refused on
a stream (and set by the dead-letter split itself), ``latency: low`` and
``low_latency(sink="delta")`` refused with the reason, ``enrich check``'s line, and the
session settings ``enrich run`` gives a Delta job. The Delta runs themselves are in
tests/delta (the Delta venv)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from jobs import _config, _delta, _entry, check

ROOT = Path(__file__).resolve().parents[2]

DELTA_JOB: dict[str, Any] = {
    "source": {"format": "kafka",
               "options": {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"},
               "select": ["topic", "partition", "offset", "CAST(value AS STRING) AS user_id"]},
    "stores": {"users": {"kind": "redis", "url": "redis://127.0.0.1:6379",
                         "key_template": "user:{}", "value": "hash", "schema": "name string"}},
    "joins": [{"store": "users", "on": "user_id"}],
    "sink": {"format": "delta", "path": "/data/orders", "mode": "append"},
    "checkpoint": "/chk",
}  # fmt: skip


def load(tmp_path: Path, config: dict[str, Any]) -> _config.JobConfig:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return _config.load(path)


def with_sink(**sink: Any) -> dict[str, Any]:
    config = copy.deepcopy(DELTA_JOB)
    config["sink"] = {"format": "delta", **sink}
    return config


def test_a_delta_sink_reads_as_delta_names_its_options(tmp_path: Path) -> None:
    config = load(tmp_path, with_sink(path="/data/t", options={"mergeschema": True}))
    assert config.sink is not None and config.sink.format == "delta"
    assert config.sink.path == "/data/t" and config.warnings == ()
    config = load(tmp_path, with_sink(options={"path": "/data/t", "mergeShema": "true"}))
    assert config.warnings == (
        "sink.options.mergeShema: not an option of format 'delta', Spark will ignore it (did "
        f"you mean 'mergeSchema'?) (known: {', '.join(_delta.SINK_OPTIONS)})",
    )


@pytest.mark.parametrize(
    ("sink", "message"),
    [
        ({}, "sink: format 'delta' needs path (the table's folder: sink.path, or "
             "sink.options.path)"),
        ({"path": "/t", "mode": "update"},
         "sink.mode: Delta's streaming sink takes output mode append or complete, got 'update'"),
        ({"path": "/t", "options": {"txnAppId": "a", "txnVersion": 3}},
         "sink.options.txnAppId: txnAppId and txnVersion key Delta's batch writes; its "
         "streaming sink keys each micro-batch by the query's id and the batch id itself "
         "(exactly once without them)"),
    ],
)  # fmt: skip
def test_what_delta_would_refuse_is_one_named_line(
    tmp_path: Path, sink: dict[str, Any], message: str
) -> None:
    with pytest.raises(_config.ConfigError) as caught:
        load(tmp_path, with_sink(**sink))
    assert str(caught.value).splitlines() == [f"{tmp_path / 'job.json'}: {message}"]


def test_a_dead_letter_split_may_name_delta_and_keys_its_writes_per_checkpoint(
    tmp_path: Path,
) -> None:
    config = with_sink(path="/data/good")
    config["dead_letter"] = {"format": "delta", "path": "/data/failed"}
    config["joins"][0]["on_error"] = "dead_letter"
    loaded = load(tmp_path, config)
    assert loaded.dead_letter is not None and loaded.dead_letter.format == "delta"
    from enrich.spark.sink.delta.keying import transaction_id

    sink, dead = transaction_id("/chk", "sink"), transaction_id("/chk", "dead_letter")
    assert sink == transaction_id("/chk", "sink")  # the same after a restart
    assert sink != dead and sink != transaction_id("/other", "sink")
    assert transaction_id(None, "sink") is None


def test_latency_low_and_the_profile_refuse_delta_with_the_reason(tmp_path: Path) -> None:
    config = {**DELTA_JOB, "latency": "low"}
    with pytest.raises(_config.ConfigError, match="latency: low: the delta sink takes no async"):
        load(tmp_path, config)
    pytest.importorskip("pyspark")
    from enrich.spark import ProfileRefused, low_latency

    with pytest.raises(ProfileRefused, match="cannot write to Delta: it runs under async"):
        low_latency(object(), sink="delta")  # refused before the DataFrame is read


def test_enrich_check_and_run_say_when_delta_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.setenv("ENRICH_DELTA_JARS", str(tmp_path / "none"))
    config = load(tmp_path, DELTA_JOB)
    (line,) = [r.line() for r in check.check(config) if r.kind == "delta"]
    assert line == (
        f"FAILED delta 'sink': no delta-spark jar in {tmp_path / 'none'}: run "
        "scripts/delta/fetch (Maven Central through mvn; ./scripts/dev test-delta runs it) "
        "or point ENRICH_DELTA_JARS at a folder holding Delta's jars"
    )
    with pytest.raises(RuntimeError, match=r"^the job writes Delta: no delta-spark jar in"):
        _entry._connectors(config)
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar"):
        (jars / name).write_bytes(b"")
    monkeypatch.setenv("ENRICH_DELTA_JARS", str(jars))
    monkeypatch.setattr("pyspark.__version__", "4.3.0")
    (line,) = [r.line() for r in check.check(config) if r.kind == "delta"]
    assert line == (
        f"FAILED delta 'sink': Delta's jars in {jars} are built for Spark 4.2, and this is "
        "pyspark 4.3.0: run the job with pyspark 4.2 (./scripts/dev test-delta builds "
        ".venv-delta with it, see docs/delta.md)"
    )
    monkeypatch.setattr("pyspark.__version__", "4.2.0")
    (line,) = [r.line() for r in check.check(config) if r.kind == "delta"]
    assert line == "ok     delta 'sink': Delta's jars found (2 jars); /data/orders: a new table"
    conf = _entry._connectors(config)
    assert str(jars / "delta-spark_4.2_2.13-4.4.0.jar") in conf["spark__jars"].split(",")
    assert conf["spark__sql__extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark__sql__catalog__spark_catalog"].endswith("DeltaCatalog")


def test_the_example_reads_without_warnings() -> None:
    config = _config.load(ROOT / "examples" / "kafka_to_delta.yaml")
    assert config.sink is not None and config.sink.format == "delta"
    assert config.sink.path == "/tmp/enrich-delta/orders-enriched"
    assert config.warnings == ()
