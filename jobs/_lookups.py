"""The config's stores and lookup steps -> library objects: ``stores`` become lookup
sources, ``joins``, ``lookups`` and ``lookup_joins`` the keyword arguments of
``lookup_join`` / ``register_lookup`` / ``register_lookup_join``, checked as those
check them (without Spark)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

import enrich
from enrich.engine.wait_settings import OperatorSettings
from enrich.lookup.join_settings import JoinSettings
from jobs._files import ConfigError
from jobs._options import did_you_mean

DEAD_LETTER = "dead_letter"
JOIN_KEYS = {
    "store",
    "on",
    "how",
    "mode",
    "capacity",
    "timeout",
    "retry",
    "cache",
    "on_error",
    "max_batch",
    "prefix",
    "error_column",
    "name",
    "shuffle",
}
LOOKUP_KEYS = JOIN_KEYS - {"on", "how", "mode", "prefix", "name", "shuffle"}
# SQL table functions (jobs/sql_job.py): `name(TABLE(view))` joins the view's rows.
LOOKUP_JOIN_KEYS = (JOIN_KEYS - {"mode", "name", "shuffle"}) | {"input"}


# kind -> (module, class, the setting passed first): the stores a config can name.
STORE_KINDS: dict[str, tuple[str, str, str]] = {
    "redis": ("connectors.redis", "RedisLookup", "url"),
    "http": ("connectors.http", "HttpLookup", "url_template"),
    "postgres": ("connectors.postgres", "PostgresLookup", "url"),
    "mysql": ("connectors.mysql", "MySqlLookup", "url"),
}


def _store_class(kind: str) -> Any:
    module, name, _ = STORE_KINDS[kind]
    return getattr(importlib.import_module(module), name)


def store(spec: Any, where: str) -> Any:
    """A lookup source from its config: ``kind`` (or ``type``) names it (:data:`STORE_KINDS`)."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a mapping, got {spec!r}")
    options = dict(spec)
    kind = options.pop("kind", None)
    if kind is None and "type" in options:
        kind = options.pop("type")
    options.pop("check_key", None)  # used by `enrich check` only
    if not isinstance(kind, str) or kind not in STORE_KINDS:
        kinds = " or ".join(repr(k) for k in STORE_KINDS)
        raise ConfigError(f"{where}.kind must be {kinds}, got {kind!r}")
    first = STORE_KINDS[kind][2]
    try:
        if isinstance(options.get("job_rate_limit"), dict):  # {rate, redis_url, key, ...}
            from enrich.protect import JobRateLimit

            options["job_rate_limit"] = JobRateLimit(**options["job_rate_limit"])
        return _store_class(kind)(options.pop(first), **options)
    except KeyError as exc:
        raise ConfigError(f"{where} needs {exc.args[0]!r}") from None
    except TypeError as exc:
        message = argument_error(exc)
        if message.startswith("unknown setting"):
            known = _settings_of(_store_class(kind)) | {"kind", "check_key"}
            bad = message.rsplit(" ", 1)[-1].strip("'")
            message += f"{did_you_mean(bad, known)} (known: {', '.join(sorted(known))})"
        raise ConfigError(f"{where}: {message}") from None
    except (ValueError, enrich.LookupFailed) as exc:
        # LookupFailed: a store whose schema is read from the database could not be asked.
        raise ConfigError(f"{where}: {exc}") from None


def _settings_of(cls: type) -> set[str]:
    """A store class's settings: the parameters of its constructor."""
    return {name for name in inspect.signature(cls).parameters if name != "self"}


def settings(
    spec: Any, where: str, stores: dict[str, Any], allowed: set[str], dead_letter: bool
) -> dict[str, Any]:
    """Keyword arguments for lookup_join / register_lookup, with objects built and checked.

    ``on_error: dead_letter`` (the default when the job has a ``dead_letter`` sink) is
    kept as it is: the job turns it into an error column it routes.
    """
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a mapping, got {spec!r}")
    out = dict(spec)
    if "source" in out and "store" not in out:
        out["store"] = out.pop("source")
    unknown = sorted(set(out) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting(s) {unknown}{did_you_mean(unknown[0], allowed)} "
            f"(known: {sorted(allowed)})"
        )
    name = out.pop("store", None)
    if not stores:
        raise ConfigError(f"{where}.store is {name!r}, but the config has no 'stores' section")
    if not isinstance(name, str) or name not in stores:
        raise ConfigError(f"{where}.store must name one of {sorted(stores)}, got {name!r}")
    out["source"] = stores[name]
    if dead_letter:
        out.setdefault("on_error", DEAD_LETTER)
    if out.get("on_error") == DEAD_LETTER and not dead_letter:
        raise ConfigError(f"{where}.on_error is 'dead_letter' but the job has no dead_letter sink")
    with named_errors(where):
        if "cache" in out:
            if not isinstance(out["cache"], dict):
                raise ValueError(f"cache must be a mapping, got {out['cache']!r}")
            out["cache"] = cache(out["cache"])
        if "retry" in out:
            out["retry"] = retry(out["retry"])
        _check(out)
    return out


@contextmanager
def named_errors(where: str) -> Iterator[None]:
    """Whatever a setting's check raises inside (a ``TypeError``, a ``ValueError``, or
    anything else), as one line: a :class:`ConfigError` naming the place in the config
    (``where``)."""
    try:
        yield
    except ConfigError:
        raise
    except TypeError as exc:
        raise ConfigError(f"{where}: {argument_error(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except Exception as exc:  # whatever else a setting's check raised: still one line
        lines = str(exc).strip().splitlines()
        raise ConfigError(f"{where}: {type(exc).__name__}: {lines[0] if lines else ''}") from None


def with_operator_settings(step: dict[str, Any]) -> dict[str, Any]:
    """A step's keyword arguments with its operator's knobs (capacity, timeout, retry,
    mode, on_error, error_column, concurrency, job_rate_limit) gathered into one
    :class:`~enrich.engine.wait_settings.OperatorSettings` (``settings=``, checked
    there), as the job hands them to ``lookup_join``, ``async_map``, the SQL
    registrations and the checks that run without Spark."""
    out = dict(step)
    knobs = {f.name: out.pop(f.name) for f in fields(OperatorSettings) if f.name in out}
    out["settings"] = OperatorSettings(**knobs)
    return out


def cache(spec: dict[str, Any]) -> enrich.LookupCache | enrich.FullCache:
    """``{kind: partial, max_rows, ttl, ...}`` (the default kind) or ``{kind: full,
    reload_interval | reload_at, initial_load, max_rows, max_bytes, ...}``."""
    options = dict(spec)
    kind = options.pop("kind", "partial")
    if kind == "full":
        return enrich.FullCache(**options)
    if kind == "partial":
        return enrich.LookupCache(**options)
    raise ValueError(f"cache.kind must be 'partial' or 'full', got {kind!r}")


def _check(join: dict[str, Any]) -> None:
    """What lookup_join checks, without Spark: a bad value is named here, not mid-run."""
    options = {k: v for k, v in join.items() if k not in ("source", "name", "shuffle", "input")}
    if not isinstance(join.get("input", "input"), str):
        raise ValueError(f"input must be the name of a view, got {join['input']!r}")
    shuffle = join.get("shuffle", False)
    if not (isinstance(shuffle, int) and (isinstance(shuffle, bool) or shuffle >= 1)):
        raise ValueError(f"shuffle must be true, false or a partition count >= 1, got {shuffle!r}")
    if options.get("on_error") == DEAD_LETTER:
        options["on_error"] = "error_column"
    knobs = with_operator_settings(options)
    JoinSettings(knobs=knobs.pop("settings"), **knobs)


def retry(spec: Any) -> enrich.RetryStrategy:
    if not isinstance(spec, dict):
        raise ValueError(f"retry must be a mapping, got {spec!r}")
    options = dict(spec)
    kind = options.pop("kind", "fixed")
    if options.pop("on_miss", False):
        options["retry_on_result"] = enrich.retry_on_empty
    if kind == "fixed":
        return enrich.FixedDelayRetry(**options)
    if kind == "exponential":
        return enrich.ExponentialBackoffRetry(**options)
    raise ValueError(f"retry.kind must be 'fixed' or 'exponential', got {kind!r}")


def argument_error(exc: TypeError) -> str:
    # "__init__() got an unexpected keyword argument 'x'" -> "unknown setting 'x'"
    text = str(exc)
    if "unexpected keyword argument" in text:
        return f"unknown setting {text.rsplit(' ', 1)[-1]}"
    return text.split("() ", 1)[-1]
