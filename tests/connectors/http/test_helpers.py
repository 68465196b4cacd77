"""The pure helpers: Retry-After parsing, URL expansion and redaction, JSON paths."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from connectors.http.body import parse_path, pick, to_rows
from connectors.http.errors import parse_retry_after
from connectors.http.url import KeyShapeError, UrlTemplate
from enrich import DecodeError, Schema
from enrich.protect.masking import mask_url

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 GMT


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("120", 120.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        ("nan", None),
        ("soon", None),
        ("", None),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),
        ("Tue, 14 Nov 2023 22:14:20 -0000", 60.0),
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, NOW) == seconds


def test_expand_escapes_every_reserved_character_and_dot_segments() -> None:
    template = UrlTemplate.parse("http://svc/a/{}/b?q={}")

    url = template.expand(("../x?y#z", ".."))

    assert str(url) == "http://svc/a/..%2Fx%3Fy%23z/b?q=%2E%2E"
    assert url.raw_path == "/a/..%2Fx%3Fy%23z/b"
    assert url.host == "svc"


@pytest.mark.parametrize("key", [("a", "b"), "", None, ("a",)])
def test_expand_rejects_keys_that_do_not_fit(key: object) -> None:
    with pytest.raises(KeyShapeError):
        UrlTemplate.parse("http://svc/a/{}").expand(key if key != ("a",) else ("a", "b", "c"))


@pytest.mark.parametrize(
    "key",
    [
        0,
        7,
        -12,
        10**20,
        True,
        "u1",
        "a.b",
        "A-Z_0~9",
        ".",
        "..",
        "...",
        ".x",
        "a/b",
        "é",
        "",
        2.5,
        ("u1",),
    ],
)
@pytest.mark.parametrize("text", ["http://svc/users/{}", "http://svc/find?id={}&v=2"])
def test_one_slot_expansion_matches_encoding_each_component(text: str, key: object) -> None:
    # The one-slot fast path (ints, unreserved strings) must build the very URL the
    # general path builds by quoting.
    template = UrlTemplate.parse(text)
    value = key[0] if isinstance(key, tuple) else key
    try:
        url = template.expand(key)
    except KeyShapeError:
        assert value == ""
        return
    encoded = quote(str(value), safe="")
    encoded = encoded.replace(".", "%2E") if not encoded.strip(".") else encoded
    assert str(url) == template.fill([encoded])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://svc/u/{}?api_key=abc&id={}", "http://svc/u/{}?api_key=***&id={}"),
        ("http://u:p@svc/u/{}", "http://***@svc/u/{}"),
        ("http://svc/u/{}?flag&empty=", "http://svc/u/{}?flag&empty="),
        ("http://svc/u/{}#frag", "http://svc/u/{}#***"),
        ("http://tok3n@svc/u", "http://***@svc/u"),
        (
            "https://svc/u?X-Amz-Signature=abc&sig=d&access_token=e",
            "https://svc/u?X-Amz-Signature=***&sig=***&access_token=***",
        ),
        ("http://svc/u?x=1#frag", "http://svc/u?x=***#***"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_pick_and_rows() -> None:
    document = {"a": {"b": [{"c": 1}, {"c": 2}]}}
    assert pick(document, parse_path("a.b.1.c", name="path")) == 2
    assert pick(document, parse_path("a.x.c", name="path")) is None
    assert pick(document, parse_path("a.b.9", name="path")) is None
    with pytest.raises(DecodeError):
        pick(document, ("a", "b", "c"))
    schema = Schema.of("c int")
    assert to_rows(document, schema, path=("a", "b")) == [(1,), (2,)]
    assert to_rows(document, schema, path=("a", "b", "0")) == (1,)
    assert to_rows(document, schema, fields={"c": ("a", "b", "1", "c")}) == (2,)
    assert to_rows(None, schema) is None
