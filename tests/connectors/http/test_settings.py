"""Construction: validation, repr, equality, pickling, the public API."""

from __future__ import annotations

import pickle
import warnings

import aiohttp
import pytest

import connectors.http
from connectors.http import HttpLookup
from enrich import LookupSource, Schema

URL = "http://svc:8080/users/{}"


def test_public_api_is_exactly_http_lookup() -> None:
    assert connectors.http.__all__ == ("HttpLookup",)
    assert isinstance(HttpLookup(URL, schema="name string"), LookupSource)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("ftp://svc/users/{}", "http or https"),
        ("svc/users/{}", "http or https"),
        ("http://svc/users", "at least one '{}' slot"),
        ("http://{}/users", "host"),
        ("http://svc:{}/users", "host"),
        ("http://svc/users/{id}", "only empty positional slots"),
        ("http://svc/users/{0}", "only empty positional slots"),
        ("http://svc/users/{:>5}", "only empty positional slots"),
        ("http://svc/users?{}=1", "query value"),
        ("http://svc/users?{}", "query value"),
        ("http://svc/users/{}#top", "fragment"),
        ("http://svc/users/{}/a b", "printable ASCII"),
        ("http://svc/ünï/{}", "printable ASCII"),
        ("http://svc:99999/{}", "Port"),
        ("http://svc/users/{", "cannot parse"),
        ("http:///users/{}", "host"),
    ],
)
def test_bad_templates_are_rejected_naming_the_setting(template: str, message: str) -> None:
    with pytest.raises(ValueError, match="url_template") as caught:
        HttpLookup(template, schema="name string")
    assert message in str(caught.value)


def test_credentials_in_the_template_are_rejected_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="credentials") as caught:
        HttpLookup("http://admin:hunter2@svc/users/{}", schema="name string")
    assert "hunter2" not in str(caught.value)


def test_literal_braces_are_allowed() -> None:
    source = HttpLookup("http://svc/users/{{x}}/{}", schema="name string")
    assert "{x}" in repr(source)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"method": "DELETE"}, "method must be one of"),
        ({"max_connections": 0}, "max_connections must be an int > 0, got 0"),
        ({"max_connections": True}, "max_connections"),
        ({"max_batch": -1}, "max_batch must be an int > 0, got -1"),
        ({"timeout": 0}, "timeout must be a finite number > 0, got 0"),
        ({"timeout": float("inf")}, "timeout"),
        ({"rate_limit": 0.0}, "rate_limit must be a finite number > 0, got 0.0"),
        ({"path": "data..user"}, "path must be a dotted path"),
        ({"fields": {"nope": "a.b"}}, "'nope' is not a schema field"),
        ({"fields": {"name": "a..b"}}, "fields['name']"),
        ({"batch_url": "http://svc/batch/{}"}, "batch_url must not contain"),
        ({"batch_url": "gopher://svc/batch"}, "batch_url must be an http or https URL"),
        ({"headers": {"X-Key": 5}}, "headers must map"),
        ({"auth": ("user", "pw"), "headers": {"authorization": "x"}}, "cannot both"),
        ({"auth": "user:pw"}, "auth must be"),
    ],
)
def test_bad_settings_are_rejected_naming_the_setting(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        HttpLookup(URL, schema="name string", **settings)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_repr_shows_settings_and_masks_secrets() -> None:
    source = HttpLookup(
        "http://svc/users/{}?api_key=s3cret-q&v={}",
        schema="name string",
        headers={"Authorization": "Bearer s3cret-h", "X-Trace": "visible?"},
        rate_limit=20,
        max_connections=7,
        path="data.user",
        fields={"name": "profile.name"},
        batch_url="http://svc/batch?token=s3cret-b",
    )

    text = repr(source)

    assert "s3cret" not in text
    assert "visible?" not in text  # every header value is masked: we cannot tell which matter
    for shown in (
        "http://svc/users/{}?api_key=***&v={}",
        "'Authorization': '***'",
        "'X-Trace': '***'",
        "rate_limit=20",
        "max_connections=7",
        "path='data.user'",
        "'name': 'profile.name'",
        "batch_url='http://svc/batch?token=***'",
        "Schema('name string')",
    ):
        assert shown in text


def test_repr_masks_basic_auth() -> None:
    source = HttpLookup(URL, schema="name string", auth=("ada", "pa55word"))
    assert "pa55word" not in repr(source)
    assert "auth='***'" in repr(source)
    assert "Authorization" not in repr(source)


def test_pickle_round_trip_keeps_an_equal_source() -> None:
    source = HttpLookup(
        URL,
        schema={"name": "string", "age": "int"},
        headers={"X-Api-Key": "k"},
        auth=("ada", "pw"),
        batch_url="http://svc/batch",
        rate_limit=5.5,
        path="a.b",
        fields={"age": "x.y"},
    )

    copy = pickle.loads(pickle.dumps(source))

    assert copy == source
    assert hash(copy) == hash(source)
    assert repr(copy) == repr(source)
    assert copy.schema == Schema.of("name string, age int")


def test_sources_with_different_settings_differ() -> None:
    assert HttpLookup(URL, schema="name string") != HttpLookup(URL, schema="name string", timeout=1)


def test_aiohttp_basic_auth_is_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # aiohttp >= 3.14 deprecates it
        auth = aiohttp.BasicAuth("ada", "pw")
    # The same credentials make the same Authorization header, hence equal sources.
    assert HttpLookup(URL, schema="name string", auth=auth) == HttpLookup(
        URL, schema="name string", auth=("ada", "pw")
    )
