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
_LINE_BREAKS = re.compile(r"\s*[\r\n\u2028\u2029\x0b\x0c\x1c-\x1e\x85]\s*")


class ConfigError(enrich.EnrichError, ValueError):
    """A job configuration that cannot be used; the message names the place.

    Its text is always one line (a value quoted in it may hold line breaks: a YAML
    block scalar's schema), so that a job can end in it.
    """

    def __str__(self) -> str:
        return _LINE_BREAKS.sub(" ", super().__str__().strip())


def read(path: str | Path) -> dict[str, Any]:
    """The config at ``path`` as plain data, with ``${...}`` references filled in."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the config {str(path)!r}: {exc.strerror}") from None
    text = decode(data, str(path))
    if not text.strip():
        raise ConfigError(f"{path}: the file is empty (a config is a mapping of sections)")
    try:
        return _parse(text, path)
    except RecursionError:  # "[[[[..." or a YAML alias bomb, thousands deep
        raise ConfigError(f"{path}: nested too deeply to be a job config") from None


def _parse(text: str, path: Path) -> dict[str, Any]:
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


def decode(data: bytes, name: str, *, secret: bool = False) -> str:
    """``data`` as text: UTF-8, with or without a byte order mark.

    Raises:
        ConfigError: anything else, in one line naming ``name``, what the bytes look
            like (UTF-16 or UTF-32 from an editor, Latin-1, binary) and where the first
            bad byte is; for a ``secret`` file, its line only.
    """
    problem = _not_utf8(data)
    if problem is None:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            problem = _bad_byte(data, exc.start, exc.reason, secret)
    raise ConfigError(f"{name}: not UTF-8 text ({problem}); save it as UTF-8")


_WHITESPACE = b"\t\n\r\x0c"
# Byte order marks other than UTF-8's, longest first (UTF-32-LE's starts as UTF-16-LE's).
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32 little-endian"),
    (b"\x00\x00\xfe\xff", "UTF-32 big-endian"),
    (b"\xff\xfe", "UTF-16 little-endian"),
    (b"\xfe\xff", "UTF-16 big-endian"),
)


def _not_utf8(data: bytes) -> str | None:
    """What ``data`` is when UTF-8 decoding would not say: a NUL byte is valid UTF-8,
    but no text config holds one, and UTF-16 of ASCII text is half NUL bytes."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return f"{encoding}, with a byte order mark"
    if b"\x00" not in data:
        return None
    if len(data) % 2 == 0:
        even, odd = data[0::2], data[1::2]
        for order, zeros, chars in (("little-endian", odd, even), ("big-endian", even, odd)):
            if zeros.count(0) >= 0.9 * len(zeros) > chars.count(0):
                return f"UTF-16 {order} without a byte order mark, it seems"
    at = data.index(b"\x00")
    return f"binary data: a NUL byte at offset {at}, line {_line(data, at)}"


def _bad_byte(data: bytes, at: int, reason: str, secret: bool) -> str:
    if secret:
        return f"line {_line(data, at)}"
    where = f"byte 0x{data[at]:02x} at offset {at}, line {_line(data, at)}"
    if reason == "unexpected end of data":
        return f"{where}: the file ends inside a character, cut short?"
    controls = any(b < 0x20 and b not in _WHITESPACE for b in data)
    if controls or sum(b >= 0x80 for b in data) > 0.3 * len(data):
        return f"{where}; binary data, it seems"
    return f"{where}; Latin-1 or Windows-1252 text, it seems"


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


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
        for key in value:
            if not isinstance(key, str) or not key.isprintable():
                # YAML reads `1:` as a number: keys here are names, and name places
                place = f"{where}: " if where else ""
                raise ConfigError(f"{place}{key!r} is not a name (keys are text, one line)")
        return {k: expand(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _secret_file(name: str, where: str) -> str:
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        # The file's name is not secret; its content never appears in a message.
        raise ConfigError(
            f"{where} uses ${{file:{name}}}, which cannot be read ({exc.strerror})"
        ) from None
    return decode(data, f"{where} uses ${{file:{name}}}", secret=True).rstrip("\r\n")
