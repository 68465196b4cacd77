"""A full cache's snapshot: its key index (dense ids, sparse integers, other keys) and
its answers, built from Arrow pages and from mappings alike."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich import FullCache
from enrich.lookup.cache.snapshot import KeyIndex, SnapshotBuilder

STRUCT = pa.struct([("name", pa.string()), ("n", pa.int32())])


@pytest.mark.parametrize(
    "keys",
    [
        [5, 3, 4, 9],  # dense: direct address
        [5, -(2**62), 2**62, 7],  # sparse: the hash table
        ["b", "a", "c", "z"],  # text: a dict
    ],
)
def test_each_index_finds_its_keys_and_nothing_else(keys: list[Any]) -> None:
    index = KeyIndex(pa.array(keys))
    asked = [keys[2], keys[0], None, "x", 2**63 + 1, -(2**63), 2**63 - 1, 6, 1.5, keys[3]]
    assert index.positions(asked).tolist() == [2, 0, -1, -1, -1, -1, -1, -1, -1, 3]
    assert index.positions([keys[1], 1.0, True, "5", keys[0]]).tolist() == [1, -1, -1, -1, 0]


def test_arrow_pages_and_mappings_answer_alike() -> None:
    class Source:
        def __repr__(self) -> str:
            return "Source()"

    builder = SnapshotBuilder(Source(), FullCache(), STRUCT)  # type: ignore[arg-type]
    page = pa.table({"k": [1, 2], "name": ["a", None], "n": pa.array([10, None], pa.int64())})
    builder.add(page, 20)
    builder.add({3: ("c", 30), 4: [("d", 1), ("d", 2)], 5: ValueError("bad")}, 10)
    snapshot = builder.build(1, 0.0)
    assert snapshot.rows == 5 and snapshot.size == 30 and snapshot.nbytes() > 0
    answers = snapshot.answers([1, 2, 3, 4, 5, 6])
    assert answers[:4] == [("a", 10), (None, None), ("c", 30), [("d", 1), ("d", 2)]]
    assert isinstance(answers[4], ValueError) and answers[5] is None
    arrow = snapshot.answer_arrow([2, 6, 3, 4], STRUCT)
    assert arrow.rows.to_pylist() == [{"name": None, "n": None}, None, {"name": "c", "n": 30}, None]
    assert arrow.multi == {3: [("d", 1), ("d", 2)]}
