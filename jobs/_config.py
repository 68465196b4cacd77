"""Job configuration files -> spark-enrich objects. No Spark here: only parsing.

A config is a JSON file (or TOML on Python >= 3.11). Values may name environment
variables as ``${NAME}``, so that secrets stay out of the file::

    {
      "sources": {
        "users": {"kind": "redis", "url": "redis://:${REDIS_PASSWORD}@dim:6379/0",
                  "key_template": "user:{}", "value": "json",
                  "schema": "name string, tier string"},
        "credit": {"kind": "http", "url_template": "http://svc/users/{}",
                   "schema": "credit double", "headers": {"Authorization": "${TOKEN}"}}
      },
      "input": {"format": "json", "path": "/data/orders", "schema": "order_id long, user_id long",
                "streaming": false},
      "joins": [
        {"source": "users", "on": "user_id", "how": "left", "capacity": 256, "timeout": 2.0,
         "on_error": "error_column", "cache": {"max_rows": 100000, "ttl": 60},
         "retry": {"kind": "exponential", "max_attempts": 3, "initial_delay": 0.05,
                   "max_delay": 1.0}},
        {"source": "credit", "on": "user_id", "prefix": "c_"}
      ],
      "lookups": {"dim_user": {"source": "users", "timeout": 2.0}},
      "output": {"format": "parquet", "path": "/data/enriched", "mode": "overwrite",
                 "checkpoint": "/data/checkpoints/enriched"}
    }
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import enrich

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_JOIN_KEYS = {
    "source",
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
}
_LOOKUP_KEYS = {
    "source",
    "capacity",
    "timeout",
    "retry",
    "cache",
    "on_error",
    "max_batch",
    "error_column",
}


class ConfigError(enrich.EnrichError, ValueError):
    """A job configuration that cannot be used; the message names the place."""


@dataclass(frozen=True)
class JobConfig:
    sources: dict[str, Any]
    input: dict[str, Any]
    joins: list[dict[str, Any]] = field(default_factory=list)
    lookups: dict[str, dict[str, Any]] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)


def load(path: str | Path) -> JobConfig:
    """Read and check a job config; sources and settings become library objects."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the config {str(path)!r}: {exc.strerror}") from None
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib

            raw = tomllib.loads(text)
        else:
            raise ConfigError(f"{path}: TOML configs need Python 3.11 or newer; use JSON")
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    return parse(_expand(raw, "config"))


def parse(raw: dict[str, Any]) -> JobConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the config must be an object")
    sources = {
        name: source(spec, f"sources.{name}")
        for name, spec in _section(raw, "sources", dict).items()
    }
    joins = [
        settings(join, f"joins[{i}]", sources, _JOIN_KEYS)
        for i, join in enumerate(_section(raw, "joins", list, required=False))
    ]
    lookups = {
        name: settings(spec, f"lookups.{name}", sources, _LOOKUP_KEYS)
        for name, spec in _section(raw, "lookups", dict, required=False).items()
    }
    return JobConfig(
        sources=sources,
        input=_section(raw, "input", dict, required=False),
        joins=joins,
        lookups=lookups,
        output=_section(raw, "output", dict, required=False),
    )


def source(spec: Any, where: str) -> Any:
    """A RedisLookup or HttpLookup from its config (``kind`` says which)."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be an object, got {spec!r}")
    options = dict(spec)
    kind = options.pop("kind", None)
    try:
        if kind == "redis":
            from connectors.redis import RedisLookup

            url = options.pop("url")
            return RedisLookup(url, **options)
        if kind == "http":
            from connectors.http import HttpLookup

            template = options.pop("url_template")
            return HttpLookup(template, **options)
    except KeyError as exc:
        raise ConfigError(f"{where} needs {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(f"{where}.kind must be 'redis' or 'http', got {kind!r}")


def settings(spec: Any, where: str, sources: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    """Keyword arguments for lookup_join / register_lookup, with objects built."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be an object, got {spec!r}")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {unknown} (known: {sorted(allowed)})")
    out = dict(spec)
    name = out.get("source")
    if name not in sources:
        raise ConfigError(f"{where}.source must name one of {sorted(sources)}, got {name!r}")
    out["source"] = sources[name]
    try:
        if "cache" in out:
            out["cache"] = enrich.LookupCache(**out["cache"])
        if "retry" in out:
            out["retry"] = retry(out["retry"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return out


def retry(spec: dict[str, Any]) -> enrich.RetryStrategy:
    options = dict(spec)
    kind = options.pop("kind", "fixed")
    if options.pop("on_miss", False):
        options["retry_on_result"] = enrich.retry_on_empty
    if kind == "fixed":
        return enrich.FixedDelayRetry(**options)
    if kind == "exponential":
        return enrich.ExponentialBackoffRetry(**options)
    raise ValueError(f"retry.kind must be 'fixed' or 'exponential', got {kind!r}")


def _section(raw: dict[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    if name not in raw:
        if required:
            raise ConfigError(f"the config needs a {name!r} section")
        return kind()
    value = raw[name]
    if not isinstance(value, kind):
        raise ConfigError(f"{name} must be a{'n object' if kind is dict else ' list'}")
    return value


def _expand(value: Any, where: str) -> Any:
    """Replace ``${NAME}`` with environment variables, naming a missing one."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{where} uses ${{{name}}}, which is not set")
            return os.environ[name]

        return _VARIABLE.sub(replace, value)
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value
