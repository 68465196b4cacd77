"""Failures every relational connector meets alike, on each real server: a restart
mid-job (rows retried or marked, never lost), a wrong password, an unreachable server, a
statement timeout; no secret anywhere."""

from __future__ import annotations

import logging
import socket
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from enrich import FixedDelayRetry, LookupFailed, SourceUnavailable, lookup_rows
from tests.connectors.sql.conftest import MakeLookup, Store

pytestmark = pytest.mark.timeout(120)
WRONG = "wr0ng-SQL-S3CRET-77ab"


def texts_of(error: BaseException) -> list[str]:
    """str, repr and the formatted traceback of ``error`` and of its whole chain."""
    texts = ["".join(traceback.format_exception(error))]
    current: BaseException | None = error
    for _ in range(10):
        if current is None:
            break
        texts += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or current.__context__
    return texts


def assert_no_secret(texts: list[str], *secrets: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret not in text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.asyncio
async def test_wrong_password_is_one_final_line_without_the_secret(
    store: Store, make_lookup: MakeLookup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = store.server
    users = make_lookup(store.url_of(password=WRONG), table="users", key="id", schema="name string")

    with pytest.raises(SourceUnavailable) as caught:
        await users.lookup_many([1])

    error = caught.value
    assert error.kind == "auth" and not error.retryable
    assert "\n" not in str(error)
    assert str(error).startswith(
        f"{store.name} at 127.0.0.1:{server.port} refused the login for user {server.user!r}"
    )
    assert_no_secret([*texts_of(error), caplog.text, repr(users)], WRONG, server.password)


@pytest.mark.asyncio
@pytest.mark.parametrize("in_url", [None, WRONG], ids=["url-without", "url-with-another"])
async def test_password_keyword_wins_and_stays_hidden(
    store: Store, make_lookup: MakeLookup, in_url: str | None
) -> None:
    password = store.server.password
    users = make_lookup(
        store.url_of(password=in_url), table="users", key="id", schema="name string",
        password=password,
    )  # fmt: skip

    assert await users.lookup_many([1]) == {1: ("Ada",)}
    assert password not in repr(users) and WRONG not in repr(users)


@pytest.mark.asyncio
async def test_unreachable_server_is_retryable_and_one_line(
    store: Store, make_lookup: MakeLookup
) -> None:
    port = free_port()
    users = make_lookup(
        store.url_of(password=WRONG, port=port),
        table="users",
        key="id",
        schema="name string",
        timeout=2,
    )

    with pytest.raises(SourceUnavailable) as caught:
        await users.lookup_many([1])

    assert caught.value.kind == "connection" and caught.value.retryable
    assert str(caught.value).startswith(f"{store.name} at 127.0.0.1:{port} is unreachable")
    assert "\n" not in str(caught.value)
    assert_no_secret(texts_of(caught.value), WRONG)


@pytest.mark.asyncio
async def test_statement_timeout_is_a_retryable_timeout(
    store: Store, make_lookup: MakeLookup
) -> None:
    slow = make_lookup(
        store.url, query=store.sleepy_query, key="id", schema="name string", timeout=0.5
    )

    with pytest.raises(LookupFailed) as caught:
        await slow.lookup_many([1])

    assert caught.value.kind == "timeout" and caught.value.retryable
    # The pool is still usable afterwards (the timed-out connection was not given back).
    fast = make_lookup(store.url, table="users", key="id", schema="name string", timeout=0.5)
    assert await fast.lookup_many([1]) == {1: ("Ada",)}


def _restart_job(
    store: Store, caplog: pytest.LogCaptureFixture, **join: Any
) -> list[dict[str, Any]]:
    """3,000 rows joined while the server goes down at row 500 and comes back once a
    lookup has met it down."""
    server = store.server
    store.table("people", "id BIGINT PRIMARY KEY, name TEXT", [(i, f"n{i}") for i in range(300)])
    caplog.set_level(logging.DEBUG, logger=store.logger)
    felt = threading.Event()

    class Felt(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "is unreachable" in record.getMessage():
                felt.set()

    def restart() -> None:
        felt.wait(timeout=60)  # back only once a lookup met the dead server
        server.start()

    handler = Felt()
    logging.getLogger(store.logger).addHandler(handler)
    restarter = threading.Thread(target=restart, name=f"{store.name}-restarter")

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(3000):
            if i == 500:
                server.stop()
                restarter.start()
            yield {"i": i, "user_id": (i * 7) % 300}

    source = store.lookup(server.url, table="people", key="id", schema="name string", timeout=2)
    try:
        return list(lookup_rows(rows(), source, on="user_id", capacity=16, max_batch=8, **join))
    finally:
        logging.getLogger(store.logger).removeHandler(handler)
        if restarter.ident is not None:
            restarter.join(timeout=90)


@pytest.mark.slow
def test_restart_mid_job_rows_are_retried_never_lost(
    restartable_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    retry = FixedDelayRetry(max_attempts=300, delay=0.02)

    out = _restart_job(restartable_store, caplog, retry=retry, timeout=60)

    assert out == [
        {"i": i, "user_id": (i * 7) % 300, "name": f"n{(i * 7) % 300}"} for i in range(3000)
    ]
    assert any("is unreachable" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_restart_mid_job_rows_without_retry_are_marked_never_lost(
    restartable_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    out = _restart_job(restartable_store, caplog, on_error="error_column", timeout=60)

    assert [row["i"] for row in out] == list(range(3000))
    marked = [row for row in out if row["enrich_error"] is not None]
    assert marked, "the outage was met by some rows"
    assert all(row["name"] is None and "unreachable" in row["enrich_error"] for row in marked)
    assert all(row["name"] == f"n{row['user_id']}" for row in out if row["enrich_error"] is None)
    assert_no_secret([row["enrich_error"] or "" for row in out], restartable_store.server.password)
