"""Reading a job config file (YAML, JSON or TOML) and filling in its secrets.

Values may name an environment variable as ``${NAME}`` (``${NAME:-default}`` when it may
be unset) or a file as ``${file:/path}``
(its content, without the trailing newline), so secrets stay out of the config. Every
problem is a :class:`ConfigError` whose message names the file or the config path, the
bad value and what is allowed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import enrich

# ${NAME}, ${NAME:-default} or ${file:/some/path}
_REFERENCE = re.compile(
    r"\$\{(?:file:(?P<file>[^}]+)|(?P<env>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?)\}"
)
FORMATS = (".yaml", ".yml", ".json", ".toml")


class ConfigError(enrich.EnrichError, ValueError):
    """A job configuration that cannot be used; the message names the place."""


def read(path: str | Path) -> dict[str, Any]:
    """The config at ``path`` as plain data, with ``${...}`` references filled in."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the config {str(path)!r}: {exc.strerror}") from None
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        raw = _yaml(text, path)
    elif suffix == ".toml":
        raw = _toml(text, path)
    elif suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    else:
        raise ConfigError(f"{path}: unknown config format {suffix!r} (allowed: {FORMATS})")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping, got {type(raw).__name__}")
    expanded: dict[str, Any] = expand(raw, "")
    return expanded


def _yaml(text: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigError(
            f"{path}: YAML configs need pyyaml: pip install 'spark-enrich[jobs]'"
        ) from None
    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None


def _yaml_loader(yaml: Any) -> Any:
    """A SafeLoader reading booleans as YAML 1.2 does (true/false only): under YAML 1.1,
    a join's ``on: user_id`` would become ``True: user_id``, and ``no``/``off`` booleans."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    return Loader


def _toml(text: str, path: Path) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - depends on the interpreter
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(
                f"{path}: TOML configs need Python 3.11 or the tomli package"
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def expand(value: Any, where: str) -> Any:
    """Replace ``${NAME}`` and ``${file:PATH}`` in every string, naming a missing one."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            if match.group("file") is not None:
                return _secret_file(match.group("file"), where)
            name = match.group("env")
            if name not in os.environ and match.group("default") is not None:
                return match.group("default")
            if name not in os.environ:
                raise ConfigError(f"{where or 'the config'} uses ${{{name}}}, which is not set")
            return os.environ[name]

        return _REFERENCE.sub(replace, value)
    if isinstance(value, dict):
        return {k: expand(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _secret_file(name: str, where: str) -> str:
    try:
        return Path(name).read_text().rstrip("\r\n")
    except OSError as exc:
        # The file's name is not secret; its content never appears in a message.
        raise ConfigError(
            f"{where} uses ${{file:{name}}}, which cannot be read ({exc.strerror})"
        ) from None
