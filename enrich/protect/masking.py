"""Masking of secrets in text shown to people: one helper per concern, shared by connectors.

Every connector shows URLs, headers and driver messages only through these helpers, so
a secret given in any form the drivers accept stays out of ``repr()``, errors and logs:

* :func:`mask_url`: the password of the userinfo (and the user too, unless asked to keep
  it), every query value and the fragment. Any query parameter may carry a credential
  (``password=``, ``token=``, ``sig=``, ``api_key=``...), so all values are masked
  rather than a list of names that would always be one short.
* :func:`mask_text`: URLs found anywhere in a text, ``name=value`` / ``name: value``
  pairs whose name suggests a credential, and the exact secrets passed in.
* :func:`is_secret_name`: whether a header or parameter name suggests a secret
  (``Authorization``, ``Cookie``, ``X-Api-Key``, ``*-Token``, ``password``...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"

# Header and parameter names that carry credentials by convention; matched as a part of
# the name, so "X-Api-Key", "X-Auth-Token" and "access_token" are caught too.
_SECRET_NAME = re.compile(
    r"auth|cookie|token|secret|passw|pwd|api[-_]?key|apikey|^key$|[-_]key$|sig|credential"
    r"|session|bearer",
    re.IGNORECASE,
)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# "name=value" outside URLs (driver messages, config lines); masked when the name is
# secret-looking (is_secret_name).
_PAIR_IN_TEXT = re.compile(r"(?P<name>[\w.-]+)(?P<sep>\s*=\s*)(?P<value>[^\s&,;'\"]+)")
# "Authorization: Bearer abc" (a header line quoted in a message): the rest of the line.
_HEADER_IN_TEXT = re.compile(
    r"(?P<name>\b(?:proxy-)?authorization|\b(?:set-)?cookie|\bx-[\w-]*(?:key|token|secret))"
    r"(?P<sep>\s*:\s*)(?P<value>[^\r\n'\"]+)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a header or query parameter called ``name`` probably carries a secret."""
    return bool(_SECRET_NAME.search(name))


def mask_url(url: str, *, keep_user: bool = False) -> str:
    """``url`` with its password, query values and fragment shown as ``***``.

    ``{}`` slots of URL templates and empty values are kept (they hold nothing). With
    ``keep_user`` the user name of the userinfo stays (an ACL user, useful in messages);
    otherwise the whole userinfo is masked, as some services take a token as the user.
    Several comma-separated hosts (Sentinel URLs) keep their addresses.
    """
    url, hash_, _ = url.partition("#")
    base, question, query = url.partition("?")
    scheme, sep, after = base.partition("://")
    if sep:
        netloc, slash, path = after.partition("/")
        if "@" not in netloc and "@" in path:  # a password with a raw "/": mask it all
            userinfo, _, tail = after.rpartition("@")
            hosts, slash, path = tail.partition("/")
            netloc = f"{userinfo}@{hosts}"
        if "@" in netloc:
            userinfo, _, hosts = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            shown = (f"{user}:{MASK}" if colon else user) if keep_user else MASK
            netloc = f"{shown}@{hosts}"
        base = scheme + sep + netloc + slash + path
    if question:
        pairs = []
        for pair in query.split("&"):
            name, equals, value = pair.partition("=")
            pairs.append(name + equals + (value if value in ("", "{}") else MASK))
        base += "?" + "&".join(pairs)
    return base + (f"#{MASK}" if hash_ else "")


def mask_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with URLs masked (:func:`mask_url`), credential pairs and ``secrets`` hidden.

    Meant for messages of drivers and servers, which may quote a URL, a config line or
    a credential; the exact secrets are replaced first, so that no part of them survives
    the other rules.
    """
    masked = text
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        masked = masked.replace(secret, MASK)
    masked = _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0), keep_user=True), masked)
    masked = _PAIR_IN_TEXT.sub(
        lambda m: f"{m['name']}{m['sep']}{MASK}" if is_secret_name(m["name"]) else m[0], masked
    )
    return _HEADER_IN_TEXT.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", masked)
