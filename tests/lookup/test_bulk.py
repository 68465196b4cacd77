"""The bulk decoders give every value the per-value decoder's outcome, and take in bulk
everything they can."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from enrich import DecodeError, Schema
from enrich.engine.records.arrow_types import arrow_schema
from enrich.lookup.contract.bulk_decode import PerValue, decode_documents, decode_texts
from enrich.lookup.contract.columnar_answer import ColumnarAnswer, answer_from_mapping
from tests.support.answers import outcomes

pytestmark = pytest.mark.timeout(30)

TYPES = ("string", "int", "bigint", "double", "float", "boolean")

# What a JSON parser hands over, including what pyarrow.array would convert differently
# from the per-value decoder (floats into integers, bools into floats, ints into text).
VALUES: list[Any] = [
    "x", "12", "", "é😀", "true", "1.5", "nan",
    0, 1, 2, -1, 42, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1,
    True, False,
    3.0, 3.5, -0.0, 0.1, 1e-320, 1e308, 3.4e39, float("inf"),
    [1], [], {"a": 1}, {},
    None,
]  # fmt: skip


def struct_of(schema: Schema) -> pa.StructType:
    return pa.struct(list(arrow_schema(schema)))


class Recorder:
    """The per-value decoder of ``documents`` (``Schema.coerce``, a list: 1:N), noting
    the positions it is asked for."""

    def __init__(self, documents: Sequence[Any], schema: Schema) -> None:
        self.documents = documents
        self.schema = schema
        self.asked: list[int] = []

    def __call__(self, positions: Sequence[int]) -> ColumnarAnswer:
        self.asked += positions
        found: dict[int, Any] = {}
        for p in positions:
            document = self.documents[p]
            try:
                if isinstance(document, list):
                    found[p] = [self.schema.coerce(item) for item in document]
                elif document is not None:
                    found[p] = self.schema.coerce(document)
            except DecodeError as exc:
                found[p] = exc
        return answer_from_mapping(positions, found, struct_of(self.schema))


def per_value_only(documents: Sequence[Any], schema: Schema) -> dict[Any, Any]:
    every = Recorder(documents, schema)(range(len(documents)))
    return outcomes(range(len(documents)), every)


def shown(found: dict[Any, Any]) -> dict[Any, str]:
    """Outcomes compared by repr: NaN (from the text "nan") equals itself there."""
    return {key: repr(value) for key, value in found.items()}


@pytest.mark.parametrize("ddl", TYPES)
def test_every_python_value_decodes_as_the_per_value_decoder_decodes_it(ddl: str) -> None:
    schema = Schema.of(f"f {ddl}, g string")
    documents: list[Any] = [{"f": value, "g": "kept"} for value in VALUES]
    documents += [None, [{"f": None}, {"g": "two"}], "text", 5]
    answer = decode_documents(documents, struct_of(schema), schema, Recorder(documents, schema))
    assert shown(outcomes(range(len(documents)), answer)) == shown(
        per_value_only(documents, schema)
    )
    # Each value alone, too: one the bulk step would misread cannot hide among values
    # that send the whole column to the per-value decoder.
    for document in documents:
        alone = decode_documents(
            [document], struct_of(schema), schema, Recorder([document], schema)
        )
        assert shown(outcomes([0], alone)) == shown(per_value_only([document], schema))


def test_only_what_the_bulk_step_cannot_take_goes_to_the_per_value_decoder() -> None:
    schema = Schema.of("name string, n int, score double, ok boolean")
    documents: list[Any] = [
        {"name": "Ada", "n": 1, "score": 2, "ok": True, "extra": [1, {"deep": None}]},
        None,  # a miss
        {"name": "Bob", "n": 3.0},  # an integral float: the per-value decoder reads 3
        [{"name": "one"}, {"name": "two"}],  # 1:N
        {"name": "Cy", "score": 0.5},
        {"n": "twelve"},
        {},
    ]
    per_value = Recorder(documents, schema)
    answer = decode_documents(documents, struct_of(schema), schema, per_value)
    assert per_value.asked == [2, 3, 5]
    got = outcomes(range(len(documents)), answer)
    assert got == per_value_only(documents, schema)
    assert got[0] == ("Ada", 1, 2.0, True) and got[1] is None and got[2] == ("Bob", 3, None, None)
    assert got[3] == ("rows", [("one", None, None, None), ("two", None, None, None)])
    assert got[5][0] == "error" and "field 'n'" in got[5][2]


def test_a_column_pyarrow_refuses_sends_its_documents_to_the_per_value_decoder() -> None:
    schema = Schema.of("n int")
    documents = [{"n": 1}, {"n": 2**40}, {"n": 3}]
    per_value = Recorder(documents, schema)
    answer = decode_documents(documents, struct_of(schema), schema, per_value)
    assert per_value.asked == [0, 1, 2]
    assert outcomes(range(3), answer) == per_value_only(documents, schema)
    assert list(answer.errors) == [1]


def test_a_null_not_null_field_is_the_per_value_decoders_error() -> None:
    schema = Schema.of("name string NOT NULL, n int")
    documents: list[Any] = [{"name": "Ada"}, {"n": 1}, {"name": None}, None]
    per_value = Recorder(documents, schema)
    answer = decode_documents(documents, struct_of(schema), schema, per_value)
    got = outcomes(range(4), answer)
    assert got == per_value_only(documents, schema)
    assert per_value.asked == [1, 2] and got[3] is None
    assert "declared string NOT NULL" in got[1][2]
    texts = [b'{"name": "Ada"}', b'{"n": 1}', b'{"name": null}', None]
    parsed = Recorder(documents, schema)
    from_texts = decode_texts(texts, struct_of(schema), schema, parsed)
    assert outcomes(range(4), from_texts) == got


def test_a_struct_with_a_type_outside_the_bulk_types_is_decoded_per_value() -> None:
    schema = Schema.of("name string, tags array<string>")
    documents: list[Any] = [{"name": "Ada", "tags": ["a"]}, None]
    per_value: PerValue = Recorder(documents, schema)
    answer = decode_documents(documents, struct_of(schema), schema, per_value)
    assert per_value.asked == [0, 1]  # type: ignore[attr-defined]
    assert outcomes(range(2), answer) == {0: ("Ada", ["a"]), 1: None}
