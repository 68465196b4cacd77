"""Store URLs with several hosts, IPv6 brackets, ports and user info: split the same way on
every Python (``urlsplit`` of 3.11.2 refuses a host list holding ``[::1]``)."""

from __future__ import annotations

import pytest

from connectors.redis.endpoint import Endpoint
from connectors.urls import UrlParts, split_url
from enrich.protect.masking import mask_url


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("redis://h", (("h", None),)),
        ("redis://Cache.Example:6390/0", (("cache.example", 6390),)),
        ("redis://127.0.0.1:6379", (("127.0.0.1", 6379),)),
        ("redis://[::1]", (("::1", None),)),
        ("redis://[::1]:6390/2", (("::1", 6390),)),
        ("redis://[2001:DB8::7]:1/0", (("2001:db8::7", 1),)),
        ("redis://[::ffff:127.0.0.1]:7", (("::ffff:127.0.0.1", 7),)),
        ("redis://h:", (("h", None),)),
        (
            "redis+sentinel://s1:26380,s2,[::1]:26381/mymaster/2",
            (("s1", 26380), ("s2", None), ("::1", 26381)),
        ),
        ("redis+sentinel://[::1],[::2]:5/m", (("::1", None), ("::2", 5))),
        ("redis://", (("", None),)),
        ("redis://:6379/0", (("", 6379),)),
        ("redis+sentinel://h,,g/m", (("h", None), ("", None), ("g", None))),
    ],
)
def test_hosts_and_ports(url: str, hosts: tuple[tuple[str, int | None], ...]) -> None:
    assert split_url(url).hosts == hosts


@pytest.mark.parametrize(
    ("url", "username", "password"),
    [
        ("redis://h/0", None, None),
        ("redis://app@h/0", "app", None),
        ("redis://app:@h/0", "app", ""),
        ("redis://:s3cret@h/0", "", "s3cret"),
        ("redis://app:s3cr%40t@h/0", "app", "s3cr@t"),
        ("redis://app:p@ss@h/0", "app", "p@ss"),  # a raw "@": the last one ends the info
        ("redis://app:a:b:c@h/0", "app", "a:b:c"),  # the first ":" splits user and password
        ("redis://app:[x]@h/0", "app", "[x]"),  # brackets outside the host are not IPv6
        ("redis://app:%2F%3F%23%25@h/0", "app", "/?#%"),
        ("redis://us%3Aer:p%20w@h/0", "us:er", "p w"),
        ("redis://app:%C3%A9t%C3%A9@h/0", "app", "été"),
        ("redis+sentinel://app:p[w@s1:26380,s2,[::1]:26381/m/2", "app", "p[w"),
    ],
)
def test_user_info_is_percent_decoded(url: str, username: str | None, password: str | None) -> None:
    parts = split_url(url)
    assert (parts.username, parts.password) == (username, password)
    assert parts.hosts[0][0] in ("h", "s1")


def test_path_query_fragment_and_scheme() -> None:
    parts = split_url("REDIS+Sentinel://h:1/mymaster/3?password=x&y=#frag")
    assert parts == UrlParts(
        scheme="redis+sentinel",
        hosts=(("h", 1),),
        path="/mymaster/3",
        query="password=x&y=",
        fragment="frag",
    )
    assert split_url("redis://h?a=1").path == ""
    assert split_url("redis://h#").fragment == ""
    assert split_url("redis://h").fragment is None


def test_the_password_stays_out_of_repr() -> None:
    assert "s3cret" not in repr(split_url("redis://u:s3cret@h/0"))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("localhost:6379", "expected scheme://host"),
        ("redis:/h", "expected scheme://host"),
        ("1redis://h", "expected scheme://host"),
        ("redis://[::1", "opens '\\[' without closing it"),
        ("redis://[nothost]:1", r"\[nothost\] is not an IPv6 address"),
        ("redis://[127.0.0.1]", r"\[127.0.0.1\] is not an IPv6 address"),
        ("redis://[::1]6379", "after its '\\]' \\(expected :port\\)"),
        ("redis://::1:6379", "an IPv6 address goes in brackets"),
        ("redis://h:1:2", "an IPv6 address goes in brackets"),
        ("redis://h:x", "port that is not a number in 1..65535"),
        ("redis://h:0", "port that is not a number in 1..65535"),
        ("redis://h:65536", "port that is not a number in 1..65535"),
        ("redis://h:-1", "port that is not a number in 1..65535"),
        ("redis://h:+1", "port that is not a number in 1..65535"),
        ("redis://h:\uff11", "port that is not a number in 1..65535"),  # a full-width digit
        ("redis://h]:1", "is not a host name"),
        ("redis://h x:1", "is not a host name"),
        ("redis+sentinel://s1,s[2]:1/m", "is not a host name"),
        ("redis://u:pa/ss@h/0", "percent-encode a '/' in user info as %2F"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_url(url)


def test_errors_never_quote_the_user_info() -> None:
    for url in ("redis://u:S3CRET@h:x/0", "redis://u:S3CRET@[::1/0", "redis://u:S3/CRET@h/0"):
        with pytest.raises(ValueError) as caught:
            split_url(url)
        assert "S3" not in str(caught.value) and "CRET" not in str(caught.value)


def test_a_raw_slash_in_a_password_is_masked_whole() -> None:
    assert mask_url("redis://u:pa/ss@h:1/0", keep_user=True) == "redis://u:***@h:1/0"


def test_a_sentinel_url_listing_an_ipv6_sentinel_is_an_endpoint() -> None:
    endpoint = Endpoint.parse(
        "redis+sentinel://app:p%40ss@s1:26380,s2,[::1]:26381/mymaster/2",
        cluster=False,
        username=None,
        password=None,
    )
    assert endpoint.sentinels == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (endpoint.service, endpoint.db) == ("mymaster", 2)
    assert (endpoint.username, endpoint.password) == ("app", "p@ss")
    assert endpoint.masked_url() == (
        "redis+sentinel://app:***@s1:26380,s2:26379,[::1]:26381/mymaster/2"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://h1,h2/0", "url names 2 hosts; only redis\\+sentinel:// takes several"),
        ("redis://u:S3CRET@h:x/0", "url has a bad host or port: 'redis://u:\\*\\*\\*@h:x/0'"),
        ("redis+sentinel://s1,[::1/m", "opens '\\[' without closing it"),
        ("redis://:6379/0", "url must name a host"),
        ("redis://u:pa/ss@h/0", "url has a bad host or port: 'redis://u:\\*\\*\\*@h/0'"),
    ],
)
def test_endpoint_errors(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Endpoint.parse(url, cluster=False, username=None, password=None)
