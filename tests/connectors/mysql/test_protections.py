"""TLS from the URL (verified against the server's CA, refused with a wrong one), the
adaptive concurrency limit and the job rate limit's settings, against a real MariaDB."""

from __future__ import annotations

import pytest

from connectors.mysql import MySqlLookup
from enrich import SourceUnavailable
from tests.connectors.mysql.conftest import USERS, MakeLookup
from tests.support.mysql_server import MySqlServer

pytestmark = pytest.mark.timeout(90)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_tls_verified_from_the_url_and_refused_with_another_ca(
    tls_mysql: MySqlServer, make_lookup: MakeLookup, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tls_mysql.sql(USERS)
    admin = tls_mysql.admin()
    try:  # plain connections refused from now on
        admin.cursor().execute("ALTER USER 'enrich'@'%' REQUIRE SSL")
    finally:
        admin.close()
    plain = make_lookup(tls_mysql.url, table="users", key="id", schema="name string")
    secure = make_lookup(
        f"{tls_mysql.url}?ssl-mode=verify_identity&ssl-ca={tls_mysql.ca_file}",
        table="users",
        key="id",
        schema="name string",
    )
    other = MySqlServer(tmp_path_factory.mktemp("other-ca"), tls=True)
    from tests.support.redis_server import make_test_certificates

    other.directory.mkdir(parents=True, exist_ok=True)
    make_test_certificates(other.directory, "127.0.0.1")
    untrusted = make_lookup(
        f"{tls_mysql.url}?ssl-mode=verify_ca&ssl-ca={other.ca_file}",
        table="users",
        key="id",
        schema="name string",
    )

    assert await secure.lookup_many([1, 99]) == {1: ("Ada",), 99: None}
    with pytest.raises(SourceUnavailable) as refused:
        await plain.lookup_many([1])
    assert refused.value.kind == "auth"
    with pytest.raises(SourceUnavailable) as caught:
        await untrusted.lookup_many([1])
    assert caught.value.kind == "tls" and not caught.value.retryable
    assert tls_mysql.password not in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.asyncio
async def test_adaptive_concurrency_reports_its_limit(
    tables: MySqlServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(
        tables.url, table="users", key="id", schema="name string", concurrency="auto", pool_size=4
    )
    assert users.concurrency_statistics() is None

    assert (await users.lookup_many([1, 2]))[1] == ("Ada",)

    statistics = users.concurrency_statistics()
    assert statistics is not None and 1 <= statistics.limit <= 4


def test_a_job_rate_limit_needs_the_redis_of_its_bucket() -> None:
    with pytest.raises(ValueError, match="needs the Redis of its shared bucket"):
        MySqlLookup("mysql://u:pw@127.0.0.1:1/db", table="t", schema="a int", job_rate_limit=100)


@pytest.mark.asyncio
@pytest.mark.parametrize(("lifetime", "connections"), [(1e-6, 4), (1800.0, 1)])
async def test_a_connection_past_its_lifetime_is_replaced(
    tables: MySqlServer, make_lookup: MakeLookup, lifetime: float, connections: int
) -> None:
    users = make_lookup(
        tables.url,
        query="SELECT id, CONNECTION_ID() AS cid FROM users WHERE id IN (:keys)",
        key="id",
        schema="cid bigint",
        max_lifetime=lifetime,
    )

    ids = {(await users.lookup_many([1]))[1][0] for _ in range(4)}

    assert len(ids) == connections  # one connection reused, or a new one each time
