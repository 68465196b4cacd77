"""Any bytes as a config file end in one line naming the file and what is wrong, exit 2.

Editors save UTF-16 (with or without a byte order mark), Windows tools Latin-1, a copy
gets cut short or a binary lands under a config's name: ``enrich check``, ``enrich run``
and the spark-submit jobs say so in one line, never in a traceback. UTF-8 with a byte
order mark (Notepad's "UTF-8 with BOM") reads as UTF-8. The fuzz test below keeps the
"never a traceback" property on mutations of every example config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from enrich import cli
from jobs import _config, _lookups, _maps, enrich_job, sql_job

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.y*ml")) + sorted((ROOT / "examples").glob("*.toml"))
TEXT = "name: café\nstores: {}\n"
SUFFIXES = (".yaml", ".json", ".toml")


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (TEXT.encode("utf-16"), "UTF-16 little-endian, with a byte order mark"),
        (b"\xfe\xff" + TEXT.encode("utf-16-be"), "UTF-16 big-endian, with a byte order mark"),
        (TEXT.encode("utf-16-le"), "UTF-16 little-endian without a byte order mark, it seems"),
        (TEXT.encode("utf-16-be"), "UTF-16 big-endian without a byte order mark, it seems"),
        (TEXT.encode("utf-32"), "UTF-32 little-endian, with a byte order mark"),
        (
            TEXT.encode("latin-1"),
            "byte 0xe9 at offset 9, line 1; Latin-1 or Windows-1252 text, it seems",
        ),
        (b"\xff\xd8\xff\xe0 JFIF", "byte 0xff at offset 0, line 1; binary data, it seems"),
        (bytes(range(0x80, 0x100)), "byte 0x80 at offset 0, line 1; binary data, it seems"),
        (b"name: x\n\x00\x01\x02", "binary data: a NUL byte at offset 8, line 2"),
        (
            TEXT.encode()[:10],
            "byte 0xc3 at offset 9, line 1: the file ends inside a character, cut short?",
        ),
    ],
    ids=[
        "utf16",
        "utf16be",
        "utf16le-nobom",
        "utf16be-nobom",
        "utf32",
        "latin1",
        "binary",
        "high",
        "nul",
        "truncated",
    ],
)
def test_a_config_that_is_not_utf8_is_named_with_its_encoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, what: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    line = f"error: {path}: not UTF-8 text ({what}); save it as UTF-8"
    assert cli.main(["check", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert cli.main(["run", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_the_spark_submit_jobs_say_the_same_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(TEXT.encode("utf-16"))
    what = "UTF-16 little-endian, with a byte order mark"
    line = f"error: {path}: not UTF-8 text ({what}); save it as UTF-8"
    assert enrich_job.main(["--config", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    sql = tmp_path / "job.sql"
    sql.write_text("SELECT 1")
    assert sql_job.main(["--config", str(path), "--sql", str(sql)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_a_sql_file_that_is_not_utf8_is_named_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("stores: {}\n")
    sql = tmp_path / "job.sql"
    sql.write_bytes("SELECT 'café'".encode("latin-1"))
    assert sql_job.main(["--config", str(config), "--sql", str(sql)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {sql}: not UTF-8 text (byte 0xe9 at offset 11, line 1; Latin-1 or "
        "Windows-1252 text, it seems); save it as UTF-8"
    ]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_utf8_with_a_byte_order_mark_reads_as_utf8(tmp_path: Path, example: Path) -> None:
    path = tmp_path / example.name
    path.write_bytes(b"\xef\xbb\xbf" + example.read_bytes())
    assert _config.load(path) == _config.load(example)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_empty_config_says_it_is_empty(tmp_path: Path, suffix: str) -> None:
    for data in (b"", b"\xef\xbb\xbf", b" \n\t\n"):
        path = tmp_path / f"config{suffix}"
        path.write_bytes(data)
        with pytest.raises(_config.ConfigError) as failed:
            _config.load(path)
        assert str(failed.value) == f"{path}: the file is empty (a config is a mapping of sections)"


def test_a_secret_file_that_is_not_utf8_is_named_without_its_bytes(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_bytes(b"p\xe4ss\n")
    path = tmp_path / "config.yaml"
    path.write_text(
        f"stores: {{users: {{kind: redis, url: 'redis://:${{file:{secret}}}@h:1/0', "
        "key_template: 'u:{}', value: json, schema: 'a int'}}\n"
    )
    with pytest.raises(_config.ConfigError) as failed:
        _config.load(path)
    message = str(failed.value)
    assert message == (
        f"{path}: stores.users.url uses ${{file:{secret}}}: not UTF-8 text (line 1); "
        "save it as UTF-8"
    )


ENCODINGS = (
    "utf-8",
    "utf-8-sig",
    "utf-16",
    "utf-16-le",
    "utf-16-be",
    "utf-32",
    "latin-1",
    "cp1252",
)


def _mutations() -> st.SearchStrategy[tuple[Path, bytes]]:
    """An example config, re-encoded, then cut, flipped, spliced or padded."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Path, bytes]:
        example = draw(st.sampled_from(EXAMPLES))
        text = example.read_text()
        if draw(st.booleans()):  # a non-ASCII value somewhere, as a user's name would be
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(["é", "ü", "日本", "\u2028", "😀"])) + text[at:]
        data = text.encode(draw(st.sampled_from(ENCODINGS)), errors="replace")
        for _ in range(draw(st.integers(0, 3))):
            op = draw(st.sampled_from(["cut", "flip", "insert", "delete", "repeat"]))
            at = draw(st.integers(0, len(data)))
            if op == "cut":
                data = data[:at]
            elif op == "flip" and at < len(data):
                data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
            elif op == "insert":
                data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
            elif op == "delete":
                data = data[:at] + data[at + draw(st.integers(1, 40)) :]
            elif op == "repeat":
                data = data[:at] + data[at : at + 30] * 2 + data[at + 30 :]
        suffix = draw(st.sampled_from([example.suffix, *SUFFIXES]))
        return Path(f"config{suffix}"), data

    return build()


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same cases in every run: a failure here is never luck
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=_mutations())
def test_any_bytes_give_one_line_never_a_traceback(
    tmp_path: Path, case: tuple[Path, bytes]
) -> None:
    name, data = case
    path = tmp_path / name
    path.write_bytes(data)
    try:
        _config.load(path)
    except _config.ConfigError as exc:
        assert "\n" not in str(exc), str(exc)
        assert str(exc)


@pytest.mark.timeout(60)
def test_the_fuzz_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line adds nothing that could raise: a sample of mutations through it."""
    samples = [
        (ex, ex.read_bytes()[: len(ex.read_bytes()) // 2].decode("utf-8", "ignore").encode(enc))
        for ex in EXAMPLES
        for enc in ("utf-16", "latin-1")
    ]
    for example, data in samples:
        path = tmp_path / example.name
        path.write_bytes(data)
        code = cli.main(["check", str(path)])
        err = capsys.readouterr().err.strip().splitlines()
        if code == 2:  # refused: one line naming the file
            assert len(err) == 1 and err[0].startswith(f"error: {path}"), err
        else:  # half a file can still be a valid config (a short example in ASCII): its
            # services are then checked, each in one line, whatever they answer
            assert code in (0, 1) and all(line.startswith(("ok", "FAILED")) for line in err), err


def _loaded(example: Path) -> Any:
    from jobs import _files

    return _files._parse(example.read_text(), example)


NAMES = sorted(
    set(_config._TOP_KEYS)
    | set(_lookups.JOIN_KEYS)
    | set(_maps.MAP_KEYS)
    | set(_maps.UDF_KEYS)
    | {"kind", "url", "url_template", "key_template", "value", "schema", "format", "options"}
    | {"path", "select", "streaming", "file_format", "mode", "redis", "http", "files", "rate"}
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(NAMES)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(NAMES) | st.text(max_size=4) | st.integers(), inner, max_size=3
        )
    ),
    max_leaves=12,
)


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _places(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _places(child, (*path, i))
    return out


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_structure_gives_one_line_never_a_traceback(data: st.DataObject) -> None:
    """Past the bytes: an example's parsed config with values replaced, keys added or
    removed (a number where a mapping goes, a key YAML read as a number...)."""
    import copy

    from jobs import _files

    raw = copy.deepcopy(PARSED[data.draw(st.sampled_from(sorted(PARSED)))])
    for _ in range(data.draw(st.integers(1, 3))):
        place = data.draw(st.sampled_from(_places(raw)))
        if not place:
            continue
        parent = raw
        for step in place[:-1]:
            parent = parent[step]
        last = place[-1]
        op = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "replace":
            parent[last] = data.draw(VALUES)
        elif op == "delete":
            del parent[last]
        elif isinstance(parent, dict):
            parent[data.draw(st.sampled_from(NAMES) | st.integers())] = data.draw(VALUES)
    try:
        _config.parse(_files.expand(raw, ""))
    except _config.ConfigError as exc:
        assert "\n" not in str(exc), str(exc)
        assert str(exc)


PARSED = {example.name: _loaded(example) for example in EXAMPLES}


def _function_steps(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The function steps of a parsed config: ``joins`` (or ``steps``) entries naming
    ``function``, and every ``async_udfs`` entry."""
    steps = [s for key in ("joins", "steps") for s in raw.get(key, []) if "function" in s]
    return steps + list(raw.get("async_udfs", {}).values())


WITH_FUNCTIONS = sorted(name for name, raw in PARSED.items() if _function_steps(raw))


def test_the_function_examples_are_in_the_fuzz() -> None:
    assert {"score_orders.yaml", "score_batches.yaml", "sql_score.yaml"} <= set(WITH_FUNCTIONS)
    assert any(PARSED[name].get("async_udfs") for name in WITH_FUNCTIONS)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_function_step_that_lost_or_moved_a_key_is_named_in_one_line(
    data: st.DataObject,
) -> None:
    """A function step's ``function`` (or ``returns``) deleted, or moved: into its
    ``args``, its ``check_row``, another step, a store, the top of the config. Each
    makes the config invalid: it must be refused, in one line naming the place."""
    import copy

    from jobs import _files

    raw = copy.deepcopy(PARSED[data.draw(st.sampled_from(WITH_FUNCTIONS))])
    steps = _function_steps(raw)
    step = data.draw(st.sampled_from(steps))
    key = data.draw(st.sampled_from(["function", "returns"]))
    value = step.pop(key)
    where = data.draw(
        st.sampled_from(["nowhere", "args", "check_row", "other step", "store", "top"])
    )
    if where in ("args", "check_row"):
        if not isinstance(step.get(where), dict):
            step[where] = {}
        step[where][key] = value
    elif where == "other step":
        others = [
            s
            for k in ("joins", "steps")
            for s in raw.get(k, [])
            if "function" not in s and s is not step
        ]
        others += [s for s in steps if s is not step and key not in s]
        if others:
            data.draw(st.sampled_from(others))[key] = value
    elif where == "store" and raw.get("stores"):
        next(iter(raw["stores"].values()))[key] = value
    elif where == "top":
        raw[key] = value
    with pytest.raises(_config.ConfigError) as refused:
        _config.parse(_files.expand(raw, ""))
    message = str(refused.value)
    assert "\n" not in message and message, message
    assert key in message or "unknown" in message, message


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"returns": "s double"}, "async_udfs.score needs 'function'"),
        ({"function": 5, "returns": "s double"}, "async_udfs.score.function must be"),
        (
            {"function": "enrich.demo.score_functions:Score", "returns": 5},
            "async_udfs.score.returns must be the fields",
        ),
        (
            {
                "function": "enrich.demo.score_functions:Score",
                "returns": "s double",
                "arguments": 5,
            },
            "async_udfs.score.arguments must be the distinct names",
        ),
        (
            {
                "function": "enrich.demo.score_functions:Score",
                "returns": "s double",
                "mode": "ordered",
            },
            "async_udfs.score: unknown setting(s) ['mode']",
        ),
    ],
)
def test_a_malformed_async_udf_is_named_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], message: str
) -> None:
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"async_udfs": {"score": spec}}))
    for command in ("check", "run"):
        assert cli.main([command, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {path}: {message}"), err
