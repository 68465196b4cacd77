"""The key rule: a key part is a str, an int (not a bool) or bytes; any other key fails its
own row with an error naming the row, the field and the value, and never shares another
key's answer (``1 == 1.0 == True`` to Python, not to the store)."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from enrich import DecodeError, LookupCache, lookup_chunks, lookup_rows
from enrich.lookup.key_rule import BadKey, admit_keys
from enrich.testing import FakeSource

RULE = "keys must be str, int or bytes"


class Color(enum.IntEnum):
    RED = 1


class Name(str, enum.Enum):
    ADA = "ada"


def test_keys_that_keep_the_rule_pass_as_they_are() -> None:
    for keys in (["a", 1, b"x", None], [("a", 1), None, ("b", b"y")], []):
        assert admit_keys(keys) is keys  # the bulk check: no copy, no per-key work


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (1.0, "row 0: key field 'user_id' is a float (1.0); " + RULE),
        (True, "row 0: key field 'user_id' is a bool (True); " + RULE),
        ([1, 2], "row 0: key field 'user_id' is a list ([1, 2]); " + RULE),
        ({"a": 1}, "row 0: key field 'user_id' is a dict ({'a': 1}); " + RULE),
        ((), "row 0: the key is an empty tuple; " + RULE),
    ],
)
def test_other_keys_become_their_rows_errors(key: Any, message: str) -> None:
    [admitted] = admit_keys([key], ("user_id",))
    assert type(admitted) is BadKey
    assert isinstance(admitted.error, DecodeError)
    assert str(admitted.error).startswith(message)
    if key != ():
        assert (admitted.error.field, admitted.error.value) == ("user_id", key)


def test_composite_keys_name_the_part_and_a_null_part_nulls_the_key() -> None:
    keys = [("eu", 1), ("eu", 2.5), ("us", None), ("eu", False)]
    out = admit_keys(keys, ("region", "no"), first_row=10)
    assert out[0] == ("eu", 1) and out[2] is None
    assert str(out[1].error).startswith("row 11: key field 'no' is a float (2.5)")
    assert str(out[3].error).startswith("row 13: key field 'no' is a bool (False)")
    unnamed = admit_keys([(1, 1.5)])
    assert str(unnamed[0].error).startswith("row 0: key part 1 is a float (1.5)")
    assert str(admit_keys([1.5])[0].error).startswith("row 0: the key is a float (1.5)")


def test_subclasses_are_taken_as_the_plain_value_they_hold() -> None:
    out = admit_keys([Color.RED, Name.ADA, bytearray(b"k"), ("x", Color.RED)])
    assert out == [1, "ada", b"k", ("x", 1)]
    assert [type(k) for k in out] == [int, str, bytes, tuple]
    assert type(out[3][1]) is int
    np = pytest.importorskip("numpy")
    assert admit_keys([np.int64(7), np.str_("s")]) == [7, "s"]
    assert type(admit_keys([np.bool_(True)])[0]) is BadKey
    assert type(admit_keys([np.float64(1.0)])[0]) is BadKey


def test_1_and_1_0_and_true_each_get_their_own_outcome() -> None:
    source = FakeSource({1: ("ann",)})
    data = [{"n": n, "k": k} for n, k in enumerate([1, 1.0, True, 1, "1"])]
    out = list(lookup_rows(data, source, on="k", on_error="error_column"))
    assert [(r["value"], r["enrich_error"]) for r in out] == [
        ("ann", None),
        (
            None,
            f"decode: row 1: key field 'k' is a float (1.0); {RULE} (a tuple of them "
            "for a composite key)",
        ),
        (
            None,
            f"decode: row 2: key field 'k' is a bool (True); {RULE} (a tuple of them "
            "for a composite key)",
        ),
        ("ann", None),
        (None, None),  # "1" is another key to Python: asked for, and a miss here
    ]
    assert sorted(map(repr, source.keys_requested)) == ["'1'", "1"]


def test_a_cached_key_never_answers_a_float_or_a_bool() -> None:
    source = FakeSource({1: ("ann",)})
    cache = LookupCache(max_rows=100, ttl=60)
    assert [r["value"] for r in lookup_rows([{"k": 1}], source, on="k", cache=cache)] == ["ann"]
    out = list(
        lookup_rows(
            [{"k": True}, {"k": 1.0}, {"k": 1}], source, on="k", on_error="null", cache=cache
        )
    )
    assert [r["value"] for r in out] == [None, None, "ann"]
    assert source.keys_requested == [1]  # the third row came from the cache


def test_row_numbers_count_from_the_start_of_the_run() -> None:
    source = FakeSource({k: (str(k),) for k in range(100)})
    data = [{"k": k} for k in range(60)] + [{"k": 60.0}]
    out = list(lookup_rows(data, source, on="k", capacity=8, on_error="error_column"))
    assert out[60]["enrich_error"].startswith("decode: row 60: key field 'k' is a float")
    assert [r["value"] for r in out[:60]] == [str(k) for k in range(60)]


def test_a_bad_key_fails_the_run_under_the_fail_policy_naming_it() -> None:
    source = FakeSource({1: ("ann",)})
    with pytest.raises(DecodeError, match=r"row 1: key field 'k' is a float \(2\.0\)"):
        list(lookup_rows([{"k": 1}, {"k": 2.0}], source, on="k"))


def test_chunk_callers_get_the_same_rule() -> None:
    source = FakeSource({1: ("ann",), (1, "a"): ("pair",)})
    chunks = [("c", [1, 1.0, True, (1, "a"), (1.0, "a"), None])]
    [joined] = list(lookup_chunks(chunks, source, on_error="error_column", capacity=40))
    assert joined.rows == [("ann",), None, None, ("pair",), None, None]
    assert joined.errors is not None
    assert joined.errors[1].startswith("decode: row 1: the key is a float (1.0)")
    assert joined.errors[2].startswith("decode: row 2: the key is a bool (True)")
    assert joined.errors[4].startswith("decode: row 4: key part 0 is a float (1.0)")
    assert sorted(map(repr, source.keys_requested)) == ["(1, 'a')", "1"]
