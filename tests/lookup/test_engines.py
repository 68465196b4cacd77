"""The two lookup engines behind one face: which one a join's keys take, and that both
give every row the same outcome and count it the same way."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich import LookupFailed
from enrich.lookup.engines import engine_for
from enrich.lookup.interface import JoinEngine
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined, JoinedChunk
from enrich.lookup.per_row.row_engine import RowEngine
from enrich.testing import ColumnarFakeSource, FakeSource

pytestmark = pytest.mark.timeout(30)

DATA: dict[Any, Any] = {
    1: ("one",),
    2: ("two",),
    3: None,  # a stored miss
    4: LookupFailed("store says no", key=4, kind="status:400", retryable=False),
    5: [("five",), ("FIVE",)],  # 1:N
}
KEYS = [1, 2, 3, None, 4, 1, 5, 6]


def rows(results: list[Any]) -> list[tuple[Any, Any, Any]]:
    """(row index, values or None, reason or None) for each output row, in order."""
    out: list[tuple[Any, Any, Any]] = []
    for joined in results:
        if isinstance(joined, JoinedChunk):
            errors = joined.errors or [None] * len(joined.indices)
            out += zip(joined.indices, joined.rows, errors, strict=True)
        else:
            assert isinstance(joined, ColumnarJoined)
            for i, struct in enumerate(joined.structs.to_pylist()):
                if joined.keep is None or joined.keep[i].as_py():
                    out.append((i, None if struct is None else tuple(struct.values()), None))
    return out


def test_the_lane_takes_one_arrow_column_of_its_types_from_a_columnar_source() -> None:
    settings = JoinSettings(capacity=64)
    ints = pa.array([1, 2])
    assert isinstance(engine_for(ColumnarFakeSource(DATA), settings, ints), ColumnarLane)
    assert isinstance(engine_for(ColumnarFakeSource(DATA), settings, pa.array(["a"])), ColumnarLane)
    # The per-row engine for everything else: no Arrow keys, a composite key, a float
    # key, a source without lookup_arrow.
    assert isinstance(engine_for(ColumnarFakeSource(DATA), settings), RowEngine)
    assert isinstance(engine_for(ColumnarFakeSource(DATA), settings, ints, 2), RowEngine)
    assert isinstance(engine_for(ColumnarFakeSource(DATA), settings, pa.array([1.0])), RowEngine)
    assert isinstance(engine_for(FakeSource(DATA), settings, ints), RowEngine)


@pytest.mark.parametrize("how", ["left", "inner"])
def test_both_engines_give_every_row_the_same_outcome(how: str) -> None:
    settings = JoinSettings(how=how, on_error="error_column", capacity=64, max_batch=3)
    lane = engine_for(ColumnarFakeSource(DATA), settings, pa.array(KEYS))
    per_row = engine_for(ColumnarFakeSource(DATA), settings)
    assert isinstance(lane, JoinEngine) and isinstance(per_row, JoinEngine)
    assert type(lane) is not type(per_row)

    run = lane.run([("chunk", pa.array(KEYS))])
    from_lane = rows(list(run))
    run.close()
    run = per_row.run([("chunk", KEYS)])
    from_rows = rows(list(run))
    run.close()

    expected = [
        (0, ("one",), None),
        (1, ("two",), None),
        *([(2, None, None), (3, None, None)] if how == "left" else []),
        (4, None, "status:400: store says no"),
        (5, ("one",), None),
        (6, ("five",), None),
        (6, ("FIVE",), None),
        *([(7, None, None)] if how == "left" else []),
    ]
    assert from_lane == from_rows == expected
    counted = [
        (m.rows_in, m.rows_out, m.misses, m.null_keys, dict(m.errors))
        for m in (lane.statistics(), per_row.statistics())
    ]
    assert counted[0] == counted[1] == (8, len(expected), 2, 1, {"status:400": 1})


def arrow_rows(results: list[Any], length: int) -> list[tuple[Any, Any, Any]]:
    """The same triples as :func:`rows`, read from each result's Arrow form."""
    out: list[tuple[Any, Any, Any]] = []
    for joined in results:
        arrow = joined.arrow(STRUCT)
        taken = arrow.input_rows(pa.record_batch([pa.array(range(length))], names=["i"]))
        errors = arrow.errors.to_pylist() if arrow.errors is not None else [None] * len(taken)
        structs = arrow.structs.to_pylist()
        for i, struct, error in zip(taken.column(0).to_pylist(), structs, errors, strict=True):
            out.append((i, None if struct is None else tuple(struct.values()), error))
    return out


STRUCT = pa.struct([("value", pa.string())])


@pytest.mark.parametrize("how", ["left", "inner"])
@pytest.mark.parametrize("policy", ["null", "drop", "error_column"])
def test_both_engines_results_give_the_same_arrow_form(how: str, policy: str) -> None:
    settings = JoinSettings(how=how, on_error=policy, capacity=64, max_batch=3)
    lane = engine_for(ColumnarFakeSource(DATA), settings, pa.array(KEYS))
    per_row = engine_for(ColumnarFakeSource(DATA), settings)
    columns = [pa.array(KEYS)]

    from_lane = list(lane.run([("chunk", lane.chunk_keys(columns))]))
    from_rows = list(per_row.run([("chunk", per_row.chunk_keys(columns))]))

    assert arrow_rows(from_lane, len(KEYS)) == arrow_rows(from_rows, len(KEYS))
    assert arrow_rows(from_rows, len(KEYS)) == rows(from_rows)
    # One row per input row (the SQL function's shape): a 1:N key gives its first row.
    firsts = [j.arrow(STRUCT).per_input_row(len(KEYS)) for j in (*from_lane, *from_rows)]
    assert firsts[0].structs.to_pylist() == firsts[1].structs.to_pylist()
    assert firsts[0].structs[6].as_py() == {"value": "five"}


def test_a_pushed_run_gives_what_a_pulled_run_gives_and_both_count_every_run() -> None:
    settings = JoinSettings(on_error="error_column", capacity=16, max_batch=2)
    keys = [pa.array(KEYS[:4]), pa.array(KEYS[4:])]
    for make in (
        lambda: engine_for(ColumnarFakeSource(DATA), settings, keys[0]),
        lambda: engine_for(ColumnarFakeSource(DATA), settings),
    ):
        pulled = make()
        expected = rows(list(pulled.run((n, pulled.chunk_keys([k])) for n, k in enumerate(keys))))
        pushed = make()
        run = pushed.pushed()
        got = [*run.push([(0, pushed.chunk_keys([keys[0]]))])]
        got += run.push([(1, pushed.chunk_keys([keys[1]]))])
        got += run.drain()
        run.close()
        assert [j.tag for j in got] == [0, 1]
        assert rows(got) == expected
        # The per-row engine joins each push as a run of its own: its metrics add up.
        assert pushed.statistics().rows_in == pulled.statistics().rows_in == len(KEYS)


ENGINE_NAMES = ("ColumnarLane", "RowEngine", "JoinedChunk", "ColumnarJoined", "with_full_cache")


def test_the_spark_worker_names_only_the_engines_face() -> None:
    """The worker and the SQL functions pick no engine by hand: no engine's or result's
    class is named under enrich/spark, and no private name crosses a module there."""
    from pathlib import Path

    import enrich.spark

    root = Path(enrich.spark.__file__).parent
    named = {
        str(path.relative_to(root)): word
        for path in root.rglob("*.py")
        for word in (
            "ColumnarLane",
            "RowEngine",
            "JoinedChunk",
            "ColumnarJoined",
            "with_full_cache",
        )
        if word in path.read_text()
    }
    assert named == {}
    private_imports = [
        f"{path.relative_to(root)}: {line.strip()}"
        for path in (root / "join").rglob("*.py")
        for line in path.read_text().splitlines()
        if line.startswith("from .") and " _" in line.split(" import ", 1)[-1].replace(",", " ")
    ]
    assert private_imports == []
