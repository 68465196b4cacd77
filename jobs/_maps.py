"""The config's async function steps -> ``async_map`` / ``register_async_udf`` arguments.

A step of ``joins`` (applied in order with the lookups) that names ``function`` instead
of ``store`` calls the user's own async function per row::

    joins:
      - {store: users, on: user_id}
      - function: enrich.demo.score_functions:Score      # module:attribute, importable here
        args: {url: "http://127.0.0.1:18080"}      # a class is built with these
        returns: "score double, label string"
        capacity: 50
        timeout: 5
        on_error: dead_letter
    async_udfs:                                    # SQL functions, for jobs/sql_job.py
      score: {function: enrich.demo.score_functions:Score, args: {...}, returns: "..."}

Every ``async_map`` setting is accepted (``mode``, ``capacity``, ``timeout``, ``retry``,
``on_error``, ``error_column``, ``name``, ``batch_size``, ``batch_wait``,
``concurrency``, ``job_rate_limit``); ``check_row`` is a row ``enrich check`` calls the
function with. The function is imported and the settings are checked here, without
Spark: a bad value is named before a job starts.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from enrich import AsyncFunction
from enrich.maps.map_settings import MapSettings
from jobs._files import ConfigError
from jobs._lookups import DEAD_LETTER, named_errors, retry, with_operator_settings
from jobs._options import did_you_mean

MAP_KEYS = {
    "function",
    "args",
    "returns",
    "mode",
    "capacity",
    "timeout",
    "retry",
    "on_error",
    "error_column",
    "name",
    "batch_size",
    "batch_wait",
    "concurrency",
    "job_rate_limit",
    "check_row",
}
# SQL functions: no mode (their rows keep their order), no drop; arguments name them.
UDF_KEYS = (MAP_KEYS - {"mode", "name"}) | {"arguments"}


# Settings only a function step has: a ``joins`` entry with one of them and no ``store``
# is a function step that lost its ``function`` (and is named so), not a lookup.
_FUNCTION_ONLY = {"function", "args", "returns", "batch_size", "batch_wait", "check_row"}
_LOOKUP_ONLY = {"store", "source", "on", "how", "cache", "max_batch", "prefix", "shuffle"}


def is_map_step(spec: Any) -> bool:
    """Whether a ``joins`` entry is an async function step: it names ``function``, or,
    naming no store, a setting only a function step has (``returns``, ``args``...)."""
    if not isinstance(spec, dict):
        return False
    if "function" in spec:
        return True
    return not ({"store", "source"} & set(spec)) and bool(_FUNCTION_ONLY & set(spec))


def map_step(spec: Any, where: str, allowed: set[str], dead_letter: bool) -> dict[str, Any]:
    """Keyword arguments for ``async_map`` (or ``register_async_udf``): ``fn`` built,
    ``returns`` and every setting checked. ``on_error: dead_letter`` is kept as it is
    (the job routes it); ``check_row`` is kept for ``enrich check``.

    Raises:
        ConfigError: naming the place, the setting and the value.
    """
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a mapping, got {spec!r}")
    out = dict(spec)
    lookup = sorted(_LOOKUP_ONLY & set(out))
    if "function" in out and lookup:
        raise ConfigError(
            f"{where} names 'function' and the lookup setting(s) {lookup}: a step is a "
            "lookup (store, on, ...) or a function (function, returns, ...), not both; "
            "was a 'function' key moved into the wrong step?"
        )
    if "function" not in out:
        raise ConfigError(
            f"{where} needs 'function': the async function to call, as 'module:attribute' "
            f"(e.g. 'mypkg.scoring:score'); allowed settings: {sorted(allowed)}"
        )
    unknown = sorted(set(out) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting(s) {unknown}{did_you_mean(unknown[0], allowed)} "
            f"(known: {sorted(allowed)})"
        )
    if "returns" not in out:
        raise ConfigError(f"{where} needs 'returns': the fields the function adds, as DDL")
    if not isinstance(out["returns"], str) or not out["returns"].strip():
        raise ConfigError(
            f"{where}.returns must be the fields the function adds, as DDL text "
            f"(e.g. 'score double, label string'), got {out['returns']!r}"
        )
    if "arguments" in out:
        out["arguments"] = _arguments(out["arguments"], f"{where}.arguments")
    out["fn"] = function(out.pop("function"), out.pop("args", None), f"{where}.function")
    if dead_letter:
        out.setdefault("on_error", DEAD_LETTER)
    if out.get("on_error") == DEAD_LETTER and not dead_letter:
        raise ConfigError(f"{where}.on_error is 'dead_letter' but the job has no dead_letter sink")
    if "check_row" in out and not isinstance(out["check_row"], dict):
        raise ConfigError(f"{where}.check_row must be a mapping (a row), got {out['check_row']!r}")
    with named_errors(where):
        if "retry" in out:
            out["retry"] = retry(out["retry"])
        if isinstance(out.get("job_rate_limit"), dict):
            from enrich.protect import JobRateLimit

            out["job_rate_limit"] = JobRateLimit(**out["job_rate_limit"])
        _check(out)
    return out


def _arguments(value: Any, where: str) -> list[str]:
    """``arguments``: the distinct names of a SQL function's plain arguments, in order."""
    names = [value] if isinstance(value, str) else value
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) and n for n in names)
        or len(set(names)) != len(names)
    ):
        raise ConfigError(
            f"{where} must be the distinct names of the function's arguments (a list of "
            f"strings, e.g. [user_id, amount]), got {value!r}"
        )
    return list(names)


def function(reference: Any, args: Any, where: str) -> Any:
    """The async function ``module:attribute`` names; a class is built with ``args``.

    Raises:
        ConfigError: the reference is malformed, does not import, or names neither an
            async function nor a class of one.
    """
    if not isinstance(reference, str) or reference.count(":") != 1:
        raise ConfigError(
            f"{where} must be 'module:attribute' (e.g. 'mypkg.scoring:score'), got {reference!r}"
        )
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import {module_name!r}: {exc}") from None
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigError(f"{where}: module {module_name!r} has no {attribute!r}")
    if args is not None and not isinstance(args, dict):
        raise ConfigError(f"{where}: args must be a mapping of keyword arguments, got {args!r}")
    if inspect.isclass(target):
        try:
            built = target(**(args or {}))
        except TypeError as exc:
            raise ConfigError(f"{where}: {reference}({_shown(args)}): {exc}") from None
        if _is_async_function(built):
            return built
        raise ConfigError(
            f"{where}: {reference}() is neither an enrich.AsyncFunction nor an async callable"
        )
    if args is not None:
        raise ConfigError(f"{where}: args are for a class; {reference} is not one")
    if _is_async_function(target):
        return target
    raise ConfigError(
        f"{where}: {reference} is not an async function (async def), an enrich.AsyncFunction "
        "or a class of one"
    )


def _is_async_function(value: Any) -> bool:
    call = getattr(value, "__call__", None)  # noqa: B004 - async callable objects
    return (
        isinstance(value, AsyncFunction)
        or inspect.iscoroutinefunction(value)
        or inspect.iscoroutinefunction(call)
    )


def _shown(args: Any) -> str:
    return ", ".join(f"{k}=..." for k in (args or {}))


def _check(step: dict[str, Any]) -> None:
    """What async_map checks, without Spark: a bad value is named here, not mid-run."""
    options = {k: v for k, v in step.items() if k not in ("fn", "name", "check_row", "arguments")}
    if options.get("on_error") == DEAD_LETTER:
        options["on_error"] = "error_column"
    knobs = with_operator_settings(options)
    MapSettings(knobs=knobs.pop("settings"), **knobs)
    name = step.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"name must be a non-empty string, got {name!r}")
