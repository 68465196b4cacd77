"""A relational database's URL: parsed once, its password kept out of every text.

``scheme://[user[:password]@]host[:port][/database][?name=value&...]``, as libpq and the
MySQL clients write it (``postgresql://``, ``postgres://``, ``mysql://``, ``mariadb://``).
The user info is percent-decoded (``%40`` is ``@``); a password given as a keyword
(``password=``, e.g. from a job config's ``${file:/run/secrets/pg}``) takes precedence
over the URL's. Query parameters are kept in order as ``(name, value)`` pairs for the
driver (``sslmode=require``, ``connect_timeout=5``...); a query parameter named like a
secret (``password``) is read as the password and never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote

from connectors.urls import split_url
from enrich.spi import MASK, mask_text

__all__ = ("DatabaseUrl",)


@dataclass(frozen=True)
class DatabaseUrl:
    """A parsed database URL (see the module docstring); ``repr`` shows no password.

    Attributes:
        scheme: as written, lower-cased (``postgresql``).
        host, port: where the server listens (``port`` is the scheme's default if absent).
        database: the database name ("" when the URL names none).
        username: the login, or None.
        password: the password, or None (never in a ``repr`` or message).
        params: the query parameters, in order, the password left out.
    """

    scheme: str
    host: str
    port: int
    database: str
    username: str | None
    password: str | None = field(repr=False)
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        schemes: tuple[str, ...],
        default_port: int,
        username: str | None = None,
        password: str | None = None,
    ) -> DatabaseUrl:
        """Parse and check ``url``.

        Raises:
            ValueError: not a string, another scheme, no host, a bad port; the message
                shows the URL masked.
        """
        if not isinstance(url, str):
            raise ValueError(f"url must be a string, got {type(url).__name__}")
        shown = mask_text(url, [password])
        try:
            parts = split_url(url)
        except ValueError as exc:
            raise ValueError(f"url {shown!r} does not parse: {exc}") from None
        if parts.scheme not in schemes:
            raise ValueError(
                f"url must start with one of {[s + '://' for s in schemes]}: {shown!r}"
            )
        if len(parts.hosts) != 1 or not parts.hosts[0][0]:
            raise ValueError(f"url must name one host: {shown!r}")
        host, port = parts.hosts[0]
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"url port must be 1-65535: {shown!r}")
        database = unquote(parts.path.lstrip("/"))
        if "/" in database:
            raise ValueError(f"url path must be one database name: {shown!r}")
        params: list[tuple[str, str]] = []
        query_password = None
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name.lower() in ("password", "passwd", "pwd"):
                query_password = value
            elif name.lower() in ("user", "username") and parts.username is None:
                username = username or value
            else:
                params.append((name, value))
        for setting, given in (("username", username), ("password", password)):
            if given is not None and not isinstance(given, str):
                raise ValueError(f"{setting} must be a string, got {type(given).__name__}")
        return cls(
            scheme=parts.scheme,
            host=host,
            port=port or default_port,
            database=database,
            username=username if username is not None else parts.username,
            password=password if password is not None else (parts.password or query_password),
            params=tuple(params),
        )

    @property
    def address(self) -> str:
        """``host:port`` (an IPv6 host in brackets), for messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def param(self, name: str, default: str | None = None) -> str | None:
        """The last value of query parameter ``name``, or ``default``."""
        found = [value for key, value in self.params if key == name]
        return found[-1] if found else default

    def masked(self) -> str:
        """The URL as messages show it: the user kept, the password ``***``."""
        auth = ""
        if self.username is not None:
            auth = quote(self.username, safe="")
            if self.password is not None:
                auth += f":{MASK}"
            auth += "@"
        query = "&".join(f"{name}={value}" for name, value in self.params)
        tail = f"?{query}" if query else ""
        return f"{self.scheme}://{auth}{self.address}/{self.database}{tail}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """What :func:`~enrich.spi.mask_text` must hide in a driver's message."""
        if not self.password:
            return ()
        return (self.password, quote(self.password, safe=""))
