"""``enrich check job.yaml``: validate a job config and try each of its stores and functions.

Each store is asked for one key (its ``check_key``, default ``0``): an answer, found or
not, shows the store is reachable, accepts the credentials and speaks the protocol; an
error for that key alone (an HTTP 400 for a key the service rejects) fails the check too,
with a hint to set ``check_key``. A function step is imported and its ``returns`` parsed
when the config loads; with a ``check_row`` (the step's, else a ``check_row``
attribute of the function, as :class:`enrich.demo.score_functions.Score` has) it is called
once with that row and its result read into ``returns``, so a service that is down is
named in one line. One line per store and function; no Spark is started.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from enrich import SourceUnavailable
from enrich.engine.runtime import run_sync

CHECK_TIMEOUT = 10.0  # seconds per store, connection and lookup together


@dataclass(frozen=True)
class StoreCheck:
    """The outcome of one store's check: ``ok``, and a line saying what happened."""

    name: str
    ok: bool
    detail: str

    kind: str = "store"

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAILED':<6} {self.kind} {self.name!r}: {self.detail}"


def check_store(name: str, store: Any, key: Any, timeout: float = CHECK_TIMEOUT) -> StoreCheck:
    """Look up ``key`` in ``store`` once; never raises for the store's own failures."""

    async def probe() -> Any:
        try:
            return await asyncio.wait_for(store.lookup_many([key]), timeout)
        finally:
            await store.aclose()

    started = time.perf_counter()
    try:
        answers = run_sync(probe)
    except asyncio.TimeoutError:
        return StoreCheck(name, False, f"no answer within {timeout:g}s ({store!r})")
    except Exception as exc:  # whatever the driver raised: the reason is the message
        return StoreCheck(name, False, f"{_reason(exc)} ({store!r})")
    elapsed = (time.perf_counter() - started) * 1e3
    answer = answers.get(key)
    if isinstance(answer, BaseException):
        hint = ""
        if not isinstance(answer, SourceUnavailable):  # the key's own error, maybe
            hint = f"; set stores.{name}.check_key to a key the store accepts"
        return StoreCheck(name, False, f"{_reason(answer)} ({store!r}){hint}")
    found = "found" if answer is not None else "not found (the store answered)"
    return StoreCheck(name, True, f"key {key!r} {found} in {elapsed:.0f} ms")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def check(config: Any) -> list[StoreCheck]:
    """Check every store of a loaded :class:`~jobs._config.JobConfig`, its Kafka
    source or sinks' brokers (:func:`jobs._kafka.broker_checks`) and its Delta sinks
    (:func:`jobs._delta.delta_checks`: the jars, the Spark line, the table)."""
    from jobs._delta import delta_checks
    from jobs._kafka import broker_checks

    stores = [
        check_store(name, store, config.check_keys.get(name, 0))
        for name, store in config.stores.items()
    ]
    brokers = [
        StoreCheck(where, ok, detail, "kafka") for where, ok, detail in broker_checks(config)
    ]
    tables = [StoreCheck(where, ok, detail, "delta") for where, ok, detail in delta_checks(config)]
    return stores + brokers + tables


def check_function(name: str, step: dict[str, Any], timeout: float = CHECK_TIMEOUT) -> StoreCheck:
    """A function step: imported and its ``returns`` parsed (the config's loading did
    both); with ``check_row``, called once with it and its result read into
    ``returns``. Never raises for the function's own failures."""
    from enrich.engine.records.call_metrics import JoinMetrics
    from enrich.engine.wait_settings import OperatorSettings
    from enrich.maps.map_settings import MapSettings
    from enrich.maps.results import Assembler

    fn = step["fn"]
    settings = MapSettings(returns=step["returns"], knobs=OperatorSettings())
    row = step.get("check_row")
    if row is None and isinstance(getattr(fn, "check_row", None), dict):
        row = fn.check_row  # the function's own: a row its service answers
    if row is None:
        returns = settings.returns.ddl()
        detail = f"{_described(fn)} imported; returns ({returns}); no check_row to call it with"
        return StoreCheck(name, True, detail, "function")

    async def call() -> Any:
        return await asyncio.wait_for(_call_once(fn, row), timeout)

    started = time.perf_counter()
    try:
        result = run_sync(call)
        Assembler(settings, JoinMetrics(), name).rows([(0, result)])
    except asyncio.TimeoutError:
        return StoreCheck(name, False, f"no answer within {timeout:g}s for check_row", "function")
    except Exception as exc:  # the function's own error, or a result that does not fit
        return StoreCheck(name, False, f"{_reason(exc)} (check_row {row!r})", "function")
    elapsed = (time.perf_counter() - started) * 1e3
    answered = f"check_row answered {result!r:.80} in {elapsed:.0f} ms"
    return StoreCheck(name, True, answered, "function")


async def _call_once(fn: Any, row: dict[str, Any]) -> Any:
    from enrich import AsyncFunction
    from enrich.engine.runtime import maybe_await

    if not isinstance(fn, AsyncFunction):
        return await fn(row)
    await maybe_await(fn.open())
    try:
        return await fn.invoke(row)
    finally:
        await maybe_await(fn.close())


def _described(fn: Any) -> str:
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{target.__module__}:{target.__qualname__}"


def check_functions(config: Any) -> list[StoreCheck]:
    """Check every function step and async SQL function of a loaded config."""
    steps = [
        (step.get("name") or f"map_{i}", step)
        for i, step in enumerate(config.joins)
        if "fn" in step
    ]
    steps += list(config.async_udfs.items())
    return [check_function(str(name), step) for name, step in steps]
