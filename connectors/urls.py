"""Splitting a store URL that may list several hosts, without ``urllib``'s netloc rules.

``scheme://[user[:password]@]host[:port][,host[:port]...][/path][?query][#fragment]``

``urllib.parse.urlsplit`` validates the brackets of a netloc as one host, and how it does
so changed across patch releases: Python 3.11.2 refuses
``redis+sentinel://s1:26380,s2,[::1]:26381/m`` ("Invalid IPv6 URL") where 3.11.7 takes it.
A Sentinel URL lists several hosts, so the authority is split here, the same way on every
Python:

* the authority runs from ``//`` to the first ``/``, ``?`` or ``#`` (RFC 3986); a
  password holding one of those must percent-encode it (``%2F``, ``%3F``, ``%23``);
* the user info is everything before the authority's *last* ``@``, split at its first
  ``:``; both parts are percent-decoded (``%40`` is ``@``), so a raw ``@``, ``:``, ``[``
  or ``]`` in a password is taken as written;
* hosts are separated by ``,``; an IPv6 address goes in brackets (``[::1]:26381``) and is
  checked with :mod:`ipaddress`; names are lower-cased, as ``urlsplit().hostname`` does.

Errors never quote the user info: callers add the URL, masked, to the message.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# A host name (RFC 3986 reg-name: unreserved, sub-delims but ",", percent-encoded) or an
# IPv4 address; anything else outside brackets (a second ":", "[", spaces) is refused.
_NAME = re.compile(r"[A-Za-z0-9._~!$&'()*+;=%-]+")
_PORT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class UrlParts:
    """A URL split into its parts; ``port`` is None where a host names none, and a host
    is ``""`` where the URL names none.

    ``username`` is None without user info and ``password`` None without a ``:`` in it;
    both are percent-decoded and may be empty strings.
    """

    scheme: str
    hosts: tuple[tuple[str, int | None], ...]
    path: str = ""
    query: str = ""
    fragment: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def split_url(url: str) -> UrlParts:
    """Split ``url`` (module docstring); the scheme comes back lower-cased.

    An empty host (``redis://``, ``redis://:6379``, ``h1,,h2``) comes back as ``""``:
    the caller says that a host is missing.

    Raises:
        ValueError: the URL has no ``scheme://``, or a host or port does not parse.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise ValueError("expected scheme://host")
    rest, hash_, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" not in authority and "@" in path:
        # Most likely a password with a raw "/": its tail must not show as a host.
        raise ValueError("'@' after the first '/': percent-encode a '/' in user info as %2F")
    userinfo, at, hosts_text = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user)
        password = unquote(secret) if colon else None
    hosts = tuple(_host_port(item) for item in hosts_text.split(","))
    return UrlParts(
        scheme=scheme.lower(),
        hosts=hosts,
        path=slash + path,
        query=query,
        fragment=fragment if hash_ else None,
        username=username,
        password=password,
    )


def _host_port(item: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if item.startswith("["):
        inside, bracket, after = item[1:].partition("]")
        if not bracket:
            raise ValueError(f"{item!r} opens '[' without closing it")
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            raise ValueError(f"[{inside}] is not an IPv6 address") from None
        host = inside.lower()
        if after and not after.startswith(":"):
            raise ValueError(f"{item!r} has {after!r} after its ']' (expected :port)")
        port_text = after[1:] if after else ""
    else:
        host, _, port_text = item.partition(":")
        if ":" in port_text:
            raise ValueError(f"{item!r}: an IPv6 address goes in brackets, as [{item}]")
        if host and not _NAME.fullmatch(host):
            raise ValueError(f"{host!r} is not a host name")
        host = host.lower()
    return host, _port(port_text, item)


def _port(text: str, item: str) -> int | None:
    if not text:
        return None  # "host:" names no port, as in urlsplit
    if not _PORT.fullmatch(text) or not 0 < int(text) <= 65535:
        raise ValueError(f"{item!r} has a port that is not a number in 1..65535")
    return int(text)
