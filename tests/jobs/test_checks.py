"""What Spark would fail on mid-run, or ignore silently, is named by the config's checks.

These are the mistakes that passed ``enrich check`` and then ended ``enrich run`` in a
traceback (a misplaced sink mode, a misspelt schema type), or were named without what
is allowed (a misspelt store setting), or were ignored by Spark (a misspelt option).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs import _config, _options

REDIS = "redis://127.0.0.1:6399/0"  # never contacted: parsing only


def job(**sections: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "source": {
            "format": "redis-stream",
            "options": {"url": REDIS, "stream": "orders"},
            "schema": "order_id long, user_id long",
        },
        "stores": {
            "users": {
                "kind": "redis",
                "url": REDIS,
                "key_template": "user:{}",
                "value": "json",
                "schema": "name string",
            }
        },
        "joins": [{"store": "users", "on": "user_id"}],
        "sink": {"format": "redis", "options": {"url": REDIS, "stream": "enriched"}},
        "checkpoint": "/tmp/unused",
    }
    config.update(sections)
    return config


def error(config: dict[str, Any]) -> str:
    with pytest.raises(_config.ConfigError) as info:
        _config.parse(config)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_examples_pass_without_warnings() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    for path in sorted(root.glob("*.*")):
        if path.suffix in (".yaml", ".toml"):
            assert _config.load(path).warnings == (), path


def test_a_sink_mode_outside_options_is_sent_to_options() -> None:
    config = job(sink={"format": "redis", "mode": "transactional", "options": {"url": REDIS}})
    message = error(config)
    assert message.startswith("sink.mode is Spark's output mode")
    assert "append, complete, update; got 'transactional'" in message
    assert "put it under sink.options.mode" in message


def test_a_sink_mode_is_checked_against_the_writer_that_writes_it() -> None:
    # a stream: output modes; a dead-letter split writes batches: save modes
    assert "did you mean 'update'" in error(job(sink={"format": "console", "mode": "updat"}))
    dead_letter = {"format": "files", "path": "/dl", "mode": "update"}
    message = error(job(dead_letter=dead_letter))
    assert message.startswith("dead_letter.mode is Spark's save mode") and "overwrite" in message
    good = job(sink={"format": "console", "mode": "complete"})
    assert _config.parse(good).sink is not None


def test_a_redis_sink_option_at_the_top_level_is_sent_to_options() -> None:
    message = error(job(sink={"format": "redis", "url": REDIS, "stream": "s"}))
    assert "unknown setting(s) ['stream', 'url']" in message
    assert "stream, url are options of format 'redis': put it under options" in message


def test_a_misspelt_source_schema_type_is_named_with_the_closest() -> None:
    source = {
        "format": "files",
        "path": "/in",
        "schema": "order_id lnog, user_id long",
    }
    message = error(job(source=source))
    assert message.startswith("source.schema: cannot parse 'order_id lnog, user_id long'")
    assert "field 'order_id': unsupported type 'lnog' (did you mean 'long'?)" in message
    assert "supported: string" in message


def test_spark_only_types_are_left_to_spark() -> None:
    source = {"format": "files", "path": "/in", "schema": "a long, b interval day"}
    assert _config.parse(job(source=source)).source is not None


def test_a_misspelt_store_setting_names_the_valid_ones() -> None:
    config = job()
    users = config["stores"]["users"]
    users["key_tempalte"] = users.pop("key_template")
    message = error(config)
    assert message.startswith("stores.users: unknown setting 'key_tempalte'")
    assert "(did you mean 'key_template'?)" in message
    assert "known: " in message and "max_batch" in message and "pool_size" in message


@pytest.mark.parametrize(
    ("where", "fix", "expected"),
    [
        ("joins", lambda c: c["joins"][0].update(capcity=3), "did you mean 'capacity'"),
        ("section", lambda c: c.update(dead_leter={}), "did you mean 'dead_letter'"),
        ("source", lambda c: c["source"].update(shema="a int"), "did you mean 'schema'"),
    ],
)
def test_other_misspellings_say_what_was_meant(where: str, fix: Any, expected: str) -> None:
    config = job()
    fix(config)
    assert expected in error(config)


def test_misspelt_options_of_our_formats_are_warnings_with_the_closest() -> None:
    source = job()["source"]
    source["options"]["startingPostion"] = "latest"
    sink = {"format": "redis", "options": {"url": REDIS, "stream": "s", "stagingTTL": 60}}
    sink["options"]["mdoe"] = "idempotent"
    config = _config.parse(job(source=source, sink=sink))
    assert len(config.warnings) == 2
    first, second = config.warnings
    assert first.startswith("source.options.startingPostion: not an option of format")
    assert "(did you mean 'startingPosition'?)" in first
    assert second.startswith("sink.options.mdoe:") and "did you mean 'mode'" in second
    # option names compare without case, as Spark's do: stagingTTL is stagingTtl


def test_bad_values_of_our_formats_options_fail_as_their_data_sources_would() -> None:
    source = job()["source"]
    source["options"]["startingPosition"] = "yesterday"
    message = error(job(source=source))
    assert message.startswith("source.options: option startingPosition must be earliest")
    sink = {"format": "redis", "options": {"url": REDIS, "stream": "s", "mode": "exactly"}}
    message = error(job(sink=sink))
    assert message.startswith('sink.options: option mode must be "idempotent"')
    sink = {"format": "redis", "options": {"url": REDIS}}
    assert "needs exactly one target" in error(job(sink=sink))


def test_the_known_options_live_in_one_place() -> None:
    assert "maxEntriesPerTrigger" in _options.KNOWN_OPTIONS[("source", "redis-stream")]
    assert "stagingTtl" in _options.KNOWN_OPTIONS[("sink", "redis")]
    assert _options.did_you_mean("rowsPerSec", ["rowsPerSecond"]) == (
        " (did you mean 'rowsPerSecond'?)"
    )
    assert _options.did_you_mean("zzz", ["rowsPerSecond"]) == ""


def test_max_error_ratio_is_a_share(tmp_path: Path) -> None:
    assert _config.parse(job(max_error_ratio=0.05)).max_error_ratio == 0.05
    for bad in (1.5, -0.1, "5%", True):
        assert "max_error_ratio must be a number from 0 to 1" in error(job(max_error_ratio=bad))
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(max_error_ratio=0)))
    assert _config.load(path).max_error_ratio == 0.0


def test_a_misspelt_trigger_unit_is_named_with_the_closest() -> None:
    message = error(job(trigger="2 secnds"))
    assert message.startswith("trigger '2 secnds': Spark knows no unit 'secnds'")
    assert "(did you mean 'seconds'?)" in message
    for good in ("10 seconds", "1 Minute", "500 milliseconds", "0.5 second"):
        assert _config.parse(job(trigger=good)).trigger == good


def test_a_memory_sink_beside_a_dead_letter_is_refused_before_the_run() -> None:
    config = job(
        sink={"format": "memory", "name": "t"},
        dead_letter={"format": "files", "path": "/dl"},
    )
    assert error(config).startswith("sink: a memory sink cannot be used with a dead_letter")


def test_a_misspelt_format_is_a_warning_any_other_is_spark_s_business() -> None:
    config = _config.parse(job(sink={"format": "files", "path": "/o", "file_format": "parquett"}))
    assert config.warnings == (
        "sink.file_format: Spark may know no format 'parquett' (did you mean 'parquet'?)",
    )
    assert _config.parse(job(sink={"format": "com.example.mysink"})).warnings == ()


def test_values_of_the_wrong_shape_are_config_errors_too() -> None:
    config = job()
    config["joins"][0]["store"] = ["users"]
    assert error(config).startswith("joins[0].store must name one of ['users'], got ['users']")
    config = job()
    config["stores"]["users"]["check_key"] = {"id": 1}
    assert error(config).startswith("stores.users.check_key must be a key")
    config["stores"]["users"]["check_key"] = [1, "a"]  # a composite key
    assert _config.parse(config).check_keys == {"users": (1, "a")}


def test_the_known_options_are_the_ones_the_data_sources_read() -> None:
    # Read off the code: an option a data source learns must be added to KNOWN_OPTIONS,
    # or configs using it would be warned of it.
    import re

    spark = Path(__file__).resolve().parents[2] / "enrich" / "spark"
    read = re.compile(r'options\.get\(\s*"(\w+)"|\(options, "(\w+)"|^\w+_OPTION = "(\w+)"', re.M)

    def names(*files: str) -> set[str]:
        text = "".join((spark / f).read_text() for f in files)
        return {a or b or c for a, b, c in read.findall(text)}

    source = names(
        "streams/stream_source.py",
        "streams/stream_options.py",
        "streams/fields.py",
        "streams/loss.py",
    )
    assert source == set(_options.KNOWN_OPTIONS[("source", "redis-stream")])
    # checkpointLocation: Spark's own, read as well
    sink = names(
        "sink/sink_spi.py",
        "sink/redis/row_writes.py",
        "sink/redis/by_source.py",
        "sink/redis/two_phase/layout.py",
    ) | {"checkpointLocation"}
    assert sink == set(_options.KNOWN_OPTIONS[("sink", "redis")])
    # kafka.bootstrap.servers: every kafka.* option goes to the producer
    kafka = names("sink/kafka/alo_settings.py") | {"kafka.bootstrap.servers"}
    assert kafka == set(_options.KNOWN_OPTIONS[("sink", "kafka-alo")])
