"""Job configs naming a relational store (``kind: postgres`` / ``type: mysql``, either
spelling), its password from a secret file, and ``enrich check``'s one line per store:
found, a wrong password, a missing table or column, an unreachable server; never the
password. Run on each real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs import _config
from jobs.check import check
from tests.connectors.sql.conftest import Store
from tests.connectors.sql.test_failures import WRONG, free_port
from tests.test_cli import run_enrich

pytestmark = pytest.mark.timeout(120)
# What each server says of a missing table and of a missing column.
MISSING = {
    "postgres": ("table 'nowhere' does not exist", 'column "nickname" does not exist'),
    "mysql": ("Table 'enrich.nowhere' doesn't exist", "Unknown column 'nickname'"),
}


def write_job(tmp_path: Path, store: Store) -> Path:
    secret = tmp_path / "db_password"
    secret.write_text(store.server.password + "\n")
    wrong = tmp_path / "wrong_password"
    wrong.write_text(WRONG + "\n")
    base, kind = store.url_of(), store.name
    job = tmp_path / "job.yaml"
    job.write_text(
        f"""
source: {{format: rate}}
stores:
  users: {{kind: {kind}, url: "{base}", password: "${{file:{secret}}}", table: users,
          key: id, schema: "name string, tier string", check_key: 1, timeout: 2}}
  accounts: {{type: {kind}, url: "{base}", password: "${{file:{secret}}}",
             table: accounts, key: [tenant, id], schema: "name string",
             check_key: [eu, 1]}}
  locked: {{kind: {kind}, url: "{base}", password: "${{file:{wrong}}}", table: users,
           key: id, schema: "name string"}}
  nowhere: {{type: {kind}, url: "{base}", password: "${{file:{secret}}}", table: nowhere,
            key: id, schema: "name string"}}
  nocolumn: {{kind: {kind}, url: "{base}", password: "${{file:{secret}}}", table: users,
             key: id, schema: "nickname string"}}
  down: {{type: {kind}, url: "{store.url_of(port=free_port())}",
         password: "${{file:{secret}}}", table: users, key: id, schema: "name string",
         timeout: 2}}
joins: [{{store: users, on: user_id}}]
"""
    )
    return job


def test_config_builds_the_stores_with_the_secret_file(store: Store, tmp_path: Path) -> None:
    config = _config.load(write_job(tmp_path, store))

    users = config.stores["users"]
    assert type(users) is store.lookup and type(config.stores["accounts"]) is store.lookup
    assert users == store.lookup(
        store.url,
        table="users", key="id", schema="name string, tier string", timeout=2,
    )  # fmt: skip
    assert store.server.password not in repr(config.stores)


def test_check_names_each_failure_in_one_line_without_secrets(store: Store, tmp_path: Path) -> None:
    lines = {c.name: c for c in check(_config.load(write_job(tmp_path, store)))}
    no_table, no_column = MISSING[store.name]

    assert lines["users"].ok and "key 1 found" in lines["users"].detail
    assert lines["accounts"].ok and "found" in lines["accounts"].detail
    assert (
        not lines["locked"].ok
        and f"refused the login for user {store.server.user!r}" in lines["locked"].detail
    )
    assert not lines["nowhere"].ok and no_table in lines["nowhere"].detail
    assert not lines["nocolumn"].ok and no_column in lines["nocolumn"].detail
    assert not lines["down"].ok and "is unreachable" in lines["down"].detail
    for outcome in lines.values():
        assert "\n" not in outcome.line()
        assert store.server.password not in outcome.line() and WRONG not in outcome.line()


def test_enrich_check_command(store: Store, tmp_path: Path) -> None:
    done = run_enrich("check", str(write_job(tmp_path, store)))

    assert done.returncode == 1
    assert "ok     store 'users': key 1 found" in done.stdout
    failed = [line for line in done.stderr.splitlines() if line.startswith("FAILED")]
    assert sorted(line.split("'")[1] for line in failed) == [
        "down",
        "locked",
        "nocolumn",
        "nowhere",
    ]
    assert "Traceback" not in done.stderr
    password = store.server.password
    assert password not in done.stdout + done.stderr and WRONG not in done.stderr
