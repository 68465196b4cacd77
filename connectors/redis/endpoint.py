"""Where a Redis store is and how to authenticate: the endpoint parsed from a URL.

Three deployments, told apart by the URL's scheme and ``cluster=``:

* standalone: ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS);
* cluster: the same URL naming any node, with ``cluster=True``;
* Sentinel: ``redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db]``
  names the sentinels (port 26379 by default) and the master's service name. The
  userinfo is the master's auth; the sentinels' own auth is ``sentinel_username`` /
  ``sentinel_password``.

IPv6 hosts go in brackets (``[::1]:26381``); the userinfo is percent-decoded (a ``/``,
``?`` or ``#`` in a password must be written ``%2F``, ``%3F``, ``%23``). The URL is split
by :func:`connectors.urls.split_url`, the same way on every Python (``urlsplit``'s rules
for a netloc with brackets differ between patch releases).

Credentials may also be given as ``?username=`` / ``?password=`` (and
``?sentinel_username=`` / ``?sentinel_password=``) query parameters, forms redis-py
accepts; any other query parameter is refused in favour of the keyword settings. Every
URL shown in a message goes through :func:`enrich.protect.masking.mask_url`, and the
secrets given as keywords are masked too, so no form of a password is ever echoed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote

from connectors.urls import UrlParts, split_url
from enrich.spi import MASK, mask_text, mask_url

DEFAULT_PORT = 6379
DEFAULT_SENTINEL_PORT = 26379

_SCHEMES = {"redis": False, "rediss": True, "redis+sentinel": False}
_CREDENTIAL_PARAMS = ("username", "password", "sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class Endpoint:
    """Where the store is and how to authenticate; no password shows in ``repr``.

    For Sentinel, ``host``/``port`` are the first sentinel's, ``sentinels`` lists them
    all and ``service`` is the master's name.
    """

    host: str
    port: int
    db: int
    tls: bool
    cluster: bool
    username: str | None
    password: str | None = field(repr=False)
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)

    @property
    def is_sentinel(self) -> bool:
        return bool(self.sentinels)

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets), or the master and sentinels, for messages."""
        if self.is_sentinel:
            return f"master {self.service!r} via sentinels {_hosts(self.sentinels)}"
        return _hosts(((self.host, self.port),))

    @property
    def secrets(self) -> tuple[str | None, ...]:
        """The passwords, for :func:`enrich.protect.masking.mask_text`."""
        return (self.password, self.sentinel_password)

    def masked_url(self) -> str:
        """The URL with the password, if any, shown as ``***``."""
        user = quote(self.username, safe="") if self.username else ""
        userinfo = f"{user}:{MASK}@" if self.password else (f"{user}@" if user else "")
        if self.is_sentinel:
            where = f"{_hosts(self.sentinels)}/{quote(self.service or '', safe='')}"
            return f"redis+sentinel://{userinfo}{where}/{self.db}"
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{userinfo}{self.address}/{self.db}"

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        cluster: bool,
        username: str | None,
        password: str | None,
        sentinel_username: str | None = None,
        sentinel_password: str | None = None,
    ) -> Endpoint:
        """Read a ``redis://``, ``rediss://`` or ``redis+sentinel://`` URL (module docstring).

        Credentials may come from the URL or from the keywords, not both.

        Raises:
            ValueError: the URL or a credential is not usable; the message masks secrets.
        """
        if not isinstance(url, str):
            raise ValueError(f"url must be a string, got {type(url).__name__}")
        given = {
            "username": username,
            "password": password,
            "sentinel_username": sentinel_username,
            "sentinel_password": sentinel_password,
        }
        for name, value in given.items():
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string, got {type(value).__name__}")
        shown = mask_text(mask_url(url, keep_user=True), (password, sentinel_password))
        scheme = url.partition("://")[0].lower()
        if "://" not in url or scheme not in _SCHEMES:
            raise ValueError(
                f"url must start with redis://, rediss:// or redis+sentinel://, got {shown!r}"
            )
        try:
            # Our own split, not urlsplit: its netloc rules refuse a list of hosts with an
            # IPv6 one on some Python patch releases (connectors.urls).
            parts = split_url(url)
        except ValueError as exc:
            raise ValueError(f"url has a bad host or port: {shown!r} ({exc})") from None
        if parts.fragment is not None:
            raise ValueError(f"url must not have a fragment, got {shown!r}")
        from_url = _credentials(parts, shown)
        for name, value in from_url.items():
            if value is not None and given[name] is not None:
                raise ValueError(f"{name} is given both in url and as {name}=: {shown!r}")
            if given[name] is None:
                given[name] = value
        user, secret = given["username"], given["password"] or None
        if any(not host for host, _ in parts.hosts):
            raise ValueError(f"url must name a host, got {shown!r}")
        if scheme == "redis+sentinel":
            if cluster:
                raise ValueError(f"cluster=True does not go with a Sentinel url: {shown!r}")
            sentinels = tuple(
                (h, DEFAULT_SENTINEL_PORT if p is None else p) for h, p in parts.hosts
            )
            service, _, db_text = parts.path.strip("/").partition("/")
            if not service:
                raise ValueError(
                    f"url must name the master after the sentinels "
                    f"(redis+sentinel://host:26379/mymaster/0), got {shown!r}"
                )
            return cls(
                host=sentinels[0][0],
                port=sentinels[0][1],
                db=_db(db_text, shown),
                tls=False,
                cluster=False,
                sentinels=sentinels,
                service=unquote(service),
                sentinel_username=given["sentinel_username"],
                sentinel_password=given["sentinel_password"] or None,
                username=user,
                password=secret,
            )
        for name in ("sentinel_username", "sentinel_password"):
            if given[name] is not None:
                raise ValueError(f"{name} needs a redis+sentinel:// url, got {shown!r}")
        if len(parts.hosts) > 1:
            raise ValueError(
                f"url names {len(parts.hosts)} hosts; only redis+sentinel:// takes several, "
                f"got {shown!r}"
            )
        ((host, port_or_none),) = parts.hosts
        port = DEFAULT_PORT if port_or_none is None else port_or_none
        db = _db(parts.path.strip("/"), shown)
        if cluster and db != 0:
            raise ValueError(f"url must use database 0 with cluster=True, got {shown!r}")
        return cls(
            host=host,
            port=port,
            db=db,
            tls=_SCHEMES[scheme],
            cluster=cluster,
            username=user,
            password=secret,
        )


def _credentials(parts: UrlParts, shown: str) -> dict[str, str | None]:
    """Credentials from the userinfo and the query (redis-py's forms)."""
    found: dict[str, str | None] = dict.fromkeys(_CREDENTIAL_PARAMS)
    found["username"] = parts.username or None
    found["password"] = parts.password or None
    query = parts.query
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ValueError(f"url has a query that does not parse: {shown!r}") from None
    for name, value in pairs:
        if name not in _CREDENTIAL_PARAMS:
            raise ValueError(
                f"url query parameter {name!r} is not supported (only "
                f"{', '.join(_CREDENTIAL_PARAMS)}; use the keyword settings), got {shown!r}"
            )
        if found[name] is not None:
            raise ValueError(f"url gives {name} twice: {shown!r}")
        found[name] = value or None
    return found


def _db(text: str, shown: str) -> int:
    text = text or "0"
    if not text.isdigit():
        raise ValueError(f"url path must be a database number, got {shown!r}")
    return int(text)


def _hosts(addresses: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in addresses)
