"""Every dimension type through a real HTTP service, per key and through the batch
endpoint; a bad value fails its key only."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from enrich import DecodeError
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import BATCH_PATH, HttpTestServer

SCHEMA = (
    "name string, price decimal(10,2), seen timestamp, born date, tags array<string>, "
    "address struct<city: string, zip: int NOT NULL>, attrs map<string,bigint>, avatar binary"
)
DOCUMENT = {
    "name": "Ada",
    "price": 19.99,
    "seen": "2024-05-01T12:30:00Z",
    "born": 7647,
    "tags": ["a", None],
    "address": {"city": "Oslo", "zip": 150},
    "attrs": {"logins": 3},
    "avatar": "aGk=",
}
EXPECTED = (
    "Ada",
    Decimal("19.99"),
    datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc),
    date(1990, 12, 9),
    ["a", None],
    {"city": "Oslo", "zip": 150},
    {"logins": 3},
    b"hi",
)


@pytest.mark.asyncio
@pytest.mark.parametrize("batch", [False, True])
async def test_documents_of_every_type(
    http_server: HttpTestServer, make_source: MakeSource, batch: bool
) -> None:
    http_server.data["u1"] = DOCUMENT
    http_server.data["u2"] = {"name": "Bob", "address": {"city": "Bergen"}}
    http_server.data["u3"] = {"name": "Eve", "price": "1e12"}
    settings = {"batch_url": http_server.url(BATCH_PATH)} if batch else {}
    source = make_source(schema=SCHEMA, **settings)

    result = await source.lookup_many(["u1", "u2", "u3", "nobody"])

    assert result["u1"] == EXPECTED
    assert result["nobody"] is None
    missing_zip, too_big = result["u2"], result["u3"]
    assert isinstance(missing_zip, DecodeError)
    assert missing_zip.field == "address.zip"
    assert "cannot read None as int NOT NULL" in str(missing_zip)
    assert isinstance(too_big, DecodeError)
    assert "field 'price': cannot read '1e12' as decimal(10,2)" in str(too_big)
