"""pytest fixtures giving tests the toy key-value store (``tests.support.kv_server``).

``kv_store`` is a fresh store per test, its password ``KV_PASSWORD`` (``.url`` carries
it), stopped after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .kv_server import KvServer

__all__ = ("KV_PASSWORD", "kv_store")

KV_PASSWORD = "s3cret-pw"


@pytest.fixture
def kv_store() -> Iterator[KvServer]:
    server = KvServer(KV_PASSWORD).start()
    try:
        yield server
    finally:
        server.stop()
