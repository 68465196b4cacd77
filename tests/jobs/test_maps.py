"""Function steps in job configs (jobs/_maps.py) and their check (``enrich check``):
imported and checked without Spark, every mistake named with its place and value."""

from __future__ import annotations

from typing import Any

import pytest

from jobs import _config
from jobs.check import check_functions
from tests.jobs.functions import Scaled, double

STEP = {"function": "tests.jobs.functions:double", "returns": "twice bigint"}


def parse(*steps: dict[str, Any], **sections: Any) -> _config.JobConfig:
    return _config.parse({"joins": list(steps), **sections})


def test_a_function_step_needs_no_store_and_keeps_its_settings() -> None:
    config = parse({**STEP, "capacity": 50, "timeout": 2, "on_error": "error_column"})
    (step,) = config.joins
    assert step["fn"] is double and step["returns"] == "twice bigint"
    assert (step["capacity"], step["timeout"], step["on_error"]) == (50, 2, "error_column")
    assert config.stores == {}


def test_a_class_is_built_with_its_args_and_steps_mix_with_lookups_in_order() -> None:
    config = _config.parse(
        {
            "stores": {"users": {"kind": "http", "url_template": "http://x/{}", "schema": "a int"}},
            "steps": [  # "steps" is "joins" under another name
                {"store": "users", "on": "id"},
                {
                    "function": "tests.jobs.functions:Scaled",
                    "args": {"factor": 3},
                    "returns": "twice bigint",
                    "batch_size": 10,
                },
            ],
        }
    )
    lookup, mapped = config.joins
    assert "source" in lookup
    assert isinstance(mapped["fn"], Scaled) and mapped["fn"].factor == 3
    assert mapped["batch_size"] == 10


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"function": "tests.jobs.functions.double"},
            r"joins\[0\]\.function must be 'module:attribute'",
        ),
        ({"function": "tests.nowhere:double"}, r"cannot import 'tests.nowhere'"),
        ({"function": "tests.jobs.functions:triple"}, r"has no 'triple'"),
        ({"function": "tests.jobs.functions:not_async"}, r"not_async is not an async function"),
        (
            {"function": "tests.jobs.functions:Scaled", "args": {"factr": 2}},
            r"Scaled\(factr=\.\.\.\)",
        ),
        ({"args": {"x": 1}}, r"args are for a class; tests.jobs.functions:double is not one"),
        ({"returns": "twice bigintt"}, r"twice"),
        ({"capacity": 0}, r"joins\[0\]: capacity must be an int >= 1, got 0"),
        (
            {"concurency": "auto"},
            r"unknown setting\(s\) \['concurency'\] \(did you mean 'concurrency'",
        ),
        ({"on_error": "dead_letter"}, r"on_error is 'dead_letter' but the job has no dead_letter"),
        ({"check_row": [1]}, r"check_row must be a mapping"),
    ],
)
def test_mistakes_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(_config.ConfigError, match=message):
        parse({**STEP, **change})


def test_a_step_without_returns_is_refused() -> None:
    with pytest.raises(_config.ConfigError, match=r"joins\[0\] needs 'returns'"):
        parse({"function": "tests.jobs.functions:double"})


def test_async_udfs_become_sql_functions_settings() -> None:
    config = parse(async_udfs={"twice": {**STEP, "arguments": ["n"]}})
    assert config.async_udfs["twice"]["arguments"] == ["n"]
    with pytest.raises(
        _config.ConfigError, match=r"async_udfs\.twice: unknown setting\(s\) \['mode'\]"
    ):
        parse(async_udfs={"twice": {**STEP, "mode": "unordered"}})


def test_check_calls_the_function_with_its_check_row() -> None:
    config = parse(
        {**STEP, "name": "doubled", "check_row": {"n": 21}},
        {**STEP, "name": "broken", "check_row": {"n": "boom"}},
        {**STEP, "name": "unfit", "check_row": {"n": "ab"}},  # "abab" is no bigint
        {
            "function": "tests.jobs.functions:Scaled",
            "args": {"factor": 2},
            "returns": "twice bigint",
            "check_row": {"n": 4},
        },
        STEP,
    )
    lines = [r.line() for r in check_functions(config)]
    assert lines[0].startswith("ok     function 'doubled': check_row answered {'twice': 42}")
    assert lines[1].startswith("FAILED function 'broken': ValueError: cannot double boom")
    assert lines[2].startswith("FAILED function 'unfit': DecodeError:")
    assert "field 'twice': cannot read 'abab' as bigint" in lines[2]
    assert lines[3].startswith("ok     function 'map_3': check_row answered [{'twice': 8}]")
    assert lines[4].startswith("ok     function 'map_4': tests.jobs.functions:double imported")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)
def test_check_names_a_down_scoring_service_of_the_sql_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/sql_score.yaml as a user copies it: `enrich check` calls Score with its
    check_row and names the service that is down, in one line, exit code 1."""
    from enrich import cli
    from tests.jobs.test_config_bytes import ROOT

    monkeypatch.setenv("ENRICH_DIMENSION_URL", f"http://127.0.0.1:{_closed_port()}")
    assert cli.main(["check", str(ROOT / "examples/sql_score.yaml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("FAILED function 'score': "), err
    assert "ClientConnectorError" in err[0] and "check_row" in err[0], err


def test_a_function_brings_its_own_check_row() -> None:
    """A step without check_row is called with the function's own (the demo's Score has
    one), so copying the demo's function copies a way to check its service."""
    from enrich.demo.score_functions import Score

    config = parse(
        async_udfs={
            "score": {
                "function": "enrich.demo.score_functions:Score",
                "args": {"url": f"http://127.0.0.1:{_closed_port()}"},
                "returns": "score double, label string",
            }
        }
    )
    (line,) = [r.line() for r in check_functions(config)]
    assert line.startswith("FAILED function 'score': ") and repr(Score.check_row) in line
