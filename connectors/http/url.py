"""URL templates for the HTTP connector: validation, key encoding; shown masked.

A template is an ``http``/``https`` URL with positional ``{}`` slots, in the path or in
query values: ``"http://svc:8080/users/{}"``, ``"http://svc/orgs/{}/users/{}"``,
``"http://svc/find?id={}&v=2"``. A scalar key fills a one-slot template; a tuple key fills
its components into the slots in order. ``{{`` and ``}}`` stand for literal braces.

Guarantee: a key never changes the scheme, host, port or the path and query structure of
the URL. Each key component is percent-encoded with ``quote(str(value), safe="")`` (so
``/``, ``?``, ``#``, ``&``, ``=``, ``%`` and spaces are escaped), dot-only values (``.``,
``..``) have their dots escaped too, and the URL is handed to aiohttp as already encoded,
so no client-side normalisation can resolve ``..`` or unescape a ``%2F``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import yarl

from connectors.templates import SlotError, split_slots
from enrich.spi import MASK, mask_url

__all__ = ("MASK", "KeyShapeError", "UrlTemplate")

# Stands in for a slot while the template's structure is checked; not a URL character
# sequence anyone writes, and the template is checked not to contain it.
_PROBE = "zz0slot0zz"
# Text that quote(text, safe="") returns unchanged: RFC 3986's unreserved characters.
_plain = re.compile(r"[A-Za-z0-9._~-]+").fullmatch


class KeyShapeError(ValueError):
    """A key that cannot fill the template's slots (wrong arity, None, empty)."""


@dataclass(frozen=True)
class UrlTemplate:
    """A validated URL template: literal text around ``slots`` positional slots.

    Attributes:
        text: the template as written.
        literals: the literal parts, one more than there are slots.
    """

    text: str
    literals: tuple[str, ...]
    # Derived from ``literals`` for expand's one-slot fast path, so not part of the value:
    # the text before and after the slot ("" and "" when there is not exactly one).
    _single: bool = field(init=False, repr=False, compare=False)
    _head: str = field(init=False, repr=False, compare=False)
    _tail: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        single = len(self.literals) == 2
        head, tail = self.literals if single else ("", "")
        for attribute, value in (("_single", single), ("_head", head), ("_tail", tail)):
            object.__setattr__(self, attribute, value)  # the dataclass is frozen

    @property
    def slots(self) -> int:
        return len(self.literals) - 1

    @classmethod
    def parse(cls, text: str, *, name: str = "url_template", slots: str = "some") -> UrlTemplate:
        """Validate ``text`` and split it around its slots.

        Args:
            text: the template.
            name: the setting's name, for error messages.
            slots: ``"some"`` (at least one slot) or ``"none"`` (a plain URL).

        Raises:
            ValueError: naming the setting and the (redacted) value.
        """
        if not isinstance(text, str):
            raise ValueError(f"{name} must be a string, got {type(text).__name__}")
        shown = mask_url(text)
        try:
            literals = split_slots(text)
        except SlotError as exc:
            if exc.field is None:
                raise ValueError(f"{name}: cannot parse {shown!r}: {exc}") from None
            raise ValueError(
                f"{name} supports only empty positional slots '{{}}', got "
                f"'{exc.field}' in {shown!r}"
            ) from None
        template = cls(text, literals)
        template._check(name, shown, slots)
        return template

    def _check(self, name: str, shown: str, slots: str) -> None:
        if _PROBE in self.text:
            raise ValueError(f"{name} must not contain {_PROBE!r}, got {shown!r}")
        for literal in self.literals:
            bad = [c for c in literal if not 33 <= ord(c) <= 126]
            if bad:
                raise ValueError(
                    f"{name} must be printable ASCII (percent-encode {bad[0]!r}), got {shown!r}"
                )
        if slots == "some" and self.slots == 0:
            raise ValueError(f"{name} needs at least one '{{}}' slot for the key, got {shown!r}")
        if slots == "none" and self.slots:
            raise ValueError(f"{name} must not contain '{{}}' slots, got {shown!r}")
        probe = self.fill([f"{_PROBE}{i}" for i in range(self.slots)])
        try:
            parts = urlsplit(probe)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc} in {shown!r}") from None
        if _PROBE in parts.netloc:
            raise ValueError(f"{name}: a slot cannot be in the host or port, got {shown!r}")
        try:
            parts.port  # noqa: B018 -- reading the port validates it
        except ValueError as exc:
            raise ValueError(f"{name}: {exc} in {shown!r}") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError(f"{name} must be an http or https URL, got {shown!r}")
        if not parts.hostname:
            raise ValueError(f"{name} needs a host, got {shown!r}")
        if "@" in parts.netloc:
            raise ValueError(
                f"{name} must not carry credentials (pass auth= or headers=), got {shown!r}"
            )
        if "#" in probe:
            raise ValueError(f"{name} must not have a fragment ('#'), got {shown!r}")
        for pair in parts.query.split("&"):
            key, _, _ = pair.partition("=")
            if _PROBE in key:
                raise ValueError(
                    f"{name}: a slot can only be a path segment or a query value, got {shown!r}"
                )

    def fill(self, encoded: list[str]) -> str:
        """The template with already-encoded text in its slots."""
        out = [self.literals[0]]
        for value, literal in zip(encoded, self.literals[1:], strict=True):
            out.append(value)
            out.append(literal)
        return "".join(out)

    def expand(self, key: Any) -> yarl.URL:
        """The URL for ``key``, each component percent-encoded into its own slot.

        Raises:
            KeyShapeError: the key has the wrong number of components, or one of them is
                None or empty (it would address a different resource, such as a listing).
        """
        if self._single:
            # The common case, kept off the general path (quote() and the checks cost
            # several microseconds a request): an int's text is digits and '-', and a str
            # of unreserved characters that is not dots alone: quote() leaves both as is.
            kind = type(key)
            if kind is int or (kind is str and _plain(key) and key.strip(".")):
                return yarl.URL(self._head + str(key) + self._tail, encoded=True)
        values = key if isinstance(key, tuple) else (key,)
        if len(values) != self.slots:
            raise KeyShapeError(
                f"the URL template has {self.slots} slot(s) but the key has "
                f"{len(values)} component(s)"
            )
        encoded = []
        for value in values:
            if value is None:
                raise KeyShapeError("a key component is None")
            text = quote(str(value), safe="")
            if not text:
                raise KeyShapeError("a key component is empty")
            if text.strip(".") == "":
                # quote() leaves dots alone, and '.' or '..' as a whole path segment is a
                # dot-segment that would move up the path.
                text = text.replace(".", "%2E")
            encoded.append(text)
        return yarl.URL(self.fill(encoded), encoded=True)

    def url(self) -> yarl.URL:
        """The URL of a template without slots."""
        return yarl.URL(self.fill([]), encoded=True)

    def redacted(self) -> str:
        """The template with its query values masked (they may be API keys)."""
        return mask_url(self.text)

    def __repr__(self) -> str:
        return f"UrlTemplate({self.redacted()!r})"
