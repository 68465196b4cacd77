"""Decoding MGET replies of JSON values, key by key (no server)."""

from __future__ import annotations

import json

from connectors.redis.codec import decode, plan
from connectors.redis.config import (
    ConnectionSettings,
    Endpoint,
    KeyTemplate,
    LookupSettings,
    ValueFormat,
)
from enrich import DecodeError, Schema

SCHEMA = Schema.of("name string, age int")
ENDPOINT = Endpoint.parse("redis://127.0.0.1:1/0", cluster=False, username=None, password=None)
SETTINGS = LookupSettings(
    connection=ConnectionSettings(
        endpoint=ENDPOINT,
        pool_size=1,
        timeout=1.0,
        tls_ca_certs=None,
        tls_verify=True,
    ),
    key_template=KeyTemplate.parse("u:{}", "utf-8"),
    value=ValueFormat.JSON,
    hash_fields=None,
    max_batch=500,
)


def test_each_json_value_decodes_or_fails_on_its_own() -> None:
    values = {
        "good": json.dumps({"name": "Ada", "age": 36}).encode(),
        "spaced": b' {"name": "Bo"} ',
        "miss": None,
        "null": b"null",
        "rows": json.dumps([{"name": "C", "age": 1}]).encode(),
        "broken": b"{not json",
        "typed": json.dumps({"name": "D", "age": "old"}).encode(),
        "scalar": b"42",
        "badrow": json.dumps([{"name": "E"}, 5]).encode(),
        "after": json.dumps({"age": 7}).encode(),
    }
    wanted = [(key, KeyTemplate.parse("u:{}", "utf-8").render(key)) for key in values]
    (command,) = plan(SETTINGS, wanted, cluster=False)

    result = decode(command, list(values.values()), SETTINGS, SCHEMA)

    assert list(result) == list(values)
    assert result["good"] == ("Ada", 36)
    assert result["spaced"] == ("Bo", None)
    assert result["miss"] is None and result["null"] is None
    assert result["rows"] == [("C", 1)]
    assert result["after"] == (None, 7)
    errors = {key: result[key] for key in ("broken", "typed", "scalar", "badrow")}
    for key, error in errors.items():
        assert isinstance(error, DecodeError)
        assert str(error).startswith(f"redis key b'u:{key}': ")
    assert errors["broken"].value == b"{not json" and "not valid JSON" in str(errors["broken"])
    assert (errors["typed"].field, errors["typed"].value) == ("age", "old")
    assert "cannot read 'old' as int" in str(errors["typed"])
    assert isinstance(errors["typed"].__cause__, DecodeError)
    assert errors["scalar"].value == 42
    assert errors["badrow"].value == 5


def test_coerce_dict_is_coerce_without_the_mapping_check() -> None:
    document = {"name": "Ada", "age": 36.0, "other": 1}

    assert SCHEMA.coerce_dict(document) == SCHEMA.coerce(document) == ("Ada", 36)
