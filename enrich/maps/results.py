"""What the function's results become: output rows in ``returns``' field order, as columns.

Each record's one output ``(position, result)`` (see :mod:`.calls`) becomes zero or more
output rows: a dict one row, a list of dicts one row each (an empty list none: the row
is dropped, as Flink's ``ResultFuture.complete([])``), None one row with null fields,
and a :class:`~enrich.lookup.outcome.Failed` what ``on_error`` says. A value is read into
``returns`` by the rules the lookups read stored values by
(:mod:`enrich.engine.records.coerce`: numbers, text, ISO timestamps, nested values);
one that does not fit (a text where a number belongs, a float in an int field) is that
row's error, naming the field, the type and the value, and never the task's unless
``on_error="fail"``. Fields the dict does not have are null; keys ``returns`` does not
name are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .._errors import DecodeError
from ..engine.checks import short
from ..engine.records.arrow_types import arrow_schema
from ..engine.records.call_metrics import JoinMetrics
from ..engine.records.failure import Failed, error_kind
from .map_settings import MapSettings


@dataclass(slots=True)
class Rows:
    """Output rows, in the order their records' outputs came.

    Attributes:
        positions: for each output row, its record's position (repeated for a list).
        values: for each output row, the fields' values in ``returns`` order, or None.
        errors: for each output row, the reason or None; None as a whole unless
            ``on_error="error_column"``.
    """

    positions: list[int]
    values: list[tuple[Any, ...] | None]
    errors: list[str | None] | None


class Assembler:
    """Turns records' outputs into :class:`Rows`, counting what each row became."""

    def __init__(self, settings: MapSettings, metrics: JoinMetrics, name: str) -> None:
        self._schema = settings.returns
        self._policy = settings.on_error
        self._metrics = metrics
        self._name = name
        self.types = [field.type for field in arrow_schema(settings.returns)]

    def rows(self, outputs: Sequence[tuple[int, Any]]) -> Rows:
        """The rows of ``outputs``.

        Raises:
            DecodeError: a value does not fit ``returns`` under ``on_error="fail"``.
        """
        coerce = self._schema.coerce_dict  # the Mapping check is the type test below
        positions: list[int] = []
        values: list[tuple[Any, ...] | None] = []
        errors: list[str | None] | None = [] if self._policy == "error_column" else None
        for position, result in outputs:
            if type(result) is dict:  # the common case first
                try:
                    value: tuple[Any, ...] | None = coerce(result)
                except DecodeError as exc:
                    self._failed(position, exc, positions, values, errors)
                    continue
                positions.append(position)
                values.append(value)
                if errors is not None:
                    errors.append(None)
            elif result is None:
                positions.append(position)
                values.append(None)
                if errors is not None:
                    errors.append(None)
            elif isinstance(result, Failed):  # counted where it failed (calls.py)
                self._keep(position, result.error, positions, values, errors)
            elif isinstance(result, (list, tuple)):
                self._many(position, result, positions, values, errors)
            else:
                self._failed(position, _not_a_row(result), positions, values, errors)
        self._metrics.rows_out += len(positions)
        return Rows(positions, values, errors)

    def columns(self, rows: Rows) -> list[pa.Array]:
        """One Arrow array per ``returns`` field; a None row gives nulls."""
        values = rows.values
        if not values:
            return [pa.array([], type=t) for t in self.types]
        if None in values:
            blank = (None,) * len(self.types)
            values = [blank if v is None else v for v in values]
        return [
            pa.array(column, type=t)
            for column, t in zip(zip(*values, strict=True), self.types, strict=True)
        ]

    def _many(
        self,
        position: int,
        results: Sequence[Any],
        positions: list[int],
        values: list[tuple[Any, ...] | None],
        errors: list[str | None] | None,
    ) -> None:
        if not results:
            self._metrics.misses += 1  # dropped: the function gave it no row
            return
        try:
            rows = [self._schema.coerce(_a_row(one)) for one in results]
        except DecodeError as exc:
            self._failed(position, exc, positions, values, errors)
            return
        for row in rows:
            positions.append(position)
            values.append(row)
            if errors is not None:
                errors.append(None)

    def _failed(
        self,
        position: int,
        error: DecodeError,
        positions: list[int],
        values: list[tuple[Any, ...] | None],
        errors: list[str | None] | None,
    ) -> None:
        """A value that does not fit ``returns``: the row's error under the policy."""
        self._metrics.errors[error_kind(error)] += 1
        if self._policy == "fail":
            raise DecodeError(
                f"{self._name}: the function's result for a row does not fit returns "
                f"({self._schema.ddl()}): {error}",
                field=error.field,
                value=error.value,
            ) from error
        self._keep(position, error, positions, values, errors)

    def _keep(
        self,
        position: int,
        error: BaseException,
        positions: list[int],
        values: list[tuple[Any, ...] | None],
        errors: list[str | None] | None,
    ) -> None:
        """A failed row under ``null``, ``error_column`` or ``drop``."""
        if self._policy == "drop":
            return
        positions.append(position)
        values.append(None)
        if errors is not None:
            errors.append(f"{error_kind(error)}: {error}")


def _a_row(value: Any) -> dict[str, Any]:
    if type(value) is dict or isinstance(value, dict):
        return value
    raise _not_a_row(value)


def _not_a_row(value: Any) -> DecodeError:
    return DecodeError(
        f"the function returned {type(value).__name__} {short(value)}: expected a dict "
        "(one row), a list of dicts (0..N rows) or None (null fields)",
        value=value,
    )
