"""A record that failed, and what the error policy makes of it.

Both users of the operator, the lookup join (a key's answer) and the async map (a
user's call), hand a failure on as a :class:`Failed`, name its reason with
:func:`error_kind` (metrics and error columns) and read ``on_error`` from
:data:`ON_ERROR`.
"""

from __future__ import annotations

from ..._errors import LookupTimeout

# What a record whose call failed becomes: "fail" (the run fails), "null" (null fields),
# "drop" (no row), "error_column" (null fields and the reason).
ON_ERROR = ("fail", "null", "drop", "error_column")


class Failed:
    """The outcome of a record (or a key) that failed: every row it stands for gets the
    error."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def error_kind(error: BaseException) -> str:
    """A short reason for metrics and error columns: "timeout", "status:503", ..."""
    if isinstance(error, LookupTimeout):
        return "timeout"
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else type(error).__name__
