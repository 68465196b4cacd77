"""Functions the job config tests name as ``module:attribute`` (no network)."""

from __future__ import annotations

from typing import Any

from enrich import AsyncFunction


async def double(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("n") == "boom":
        raise ValueError("cannot double boom")
    return {"twice": row["n"] * 2}


def not_async(row: dict[str, Any]) -> dict[str, Any]:
    return row


class Scaled(AsyncFunction):
    """An AsyncFunction built from the step's ``args``."""

    def __init__(self, factor: int, column: str = "n") -> None:
        self.factor = factor
        self.column = column
        self.opened = False

    async def open(self) -> None:
        self.opened = True

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.opened, "invoke() before open()"
        return [{"twice": row[self.column] * self.factor}]
