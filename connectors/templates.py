"""``{}`` templates, parsed once for both connectors (Redis key templates, HTTP URLs).

A template is literal text with positional ``{}`` slots; ``{{`` and ``}}`` stand for
literal braces. :func:`split_slots` returns the literal text around the slots, so a
connector fills a key in by concatenation, never by ``str.format`` at request time.
Each connector words its own error messages (they name its setting); this module only
says what is wrong.
"""

from __future__ import annotations

import string

__all__ = ("SlotError", "split_slots")


class SlotError(ValueError):
    """A template that does not parse, or a slot that is not an empty ``{}``.

    Attributes:
        field: the offending slot as written (``"{id}"``, ``"{:>5}"``), or None when the
            text does not parse at all (the message then says why).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def split_slots(text: str) -> tuple[str, ...]:
    """The literal parts of ``text`` around its ``{}`` slots: one more than the slots.

    ``"user:{}"`` gives ``("user:", "")``; ``"{{tag}}:{}"`` gives ``("{tag}:", "")``;
    a template without slots gives its text alone.

    Raises:
        SlotError: the braces do not balance (``field`` None), or a slot has a name, an
            index, a conversion or a format spec (``field`` is that slot as written).
    """
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise SlotError(str(exc)) from None
    literals: list[str] = []
    pending = ""
    for literal, name, spec, conversion in pieces:
        pending += literal
        if name is None:
            continue
        if name or spec or conversion:
            shown = "{" + name + ("!" + conversion if conversion else "")
            shown += (":" + spec if spec else "") + "}"
            raise SlotError(f"only empty '{{}}' slots are supported, got {shown!r}", shown)
        literals.append(pending)
        pending = ""
    literals.append(pending)
    return tuple(literals)
