"""Job configs naming a MySQL/MariaDB store (``type: mysql``), its password from a secret
file, and ``enrich check``'s one line per store: found, a wrong password, a missing table
or column, an unreachable server; never the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.mysql import MySqlLookup
from jobs import _config
from jobs.check import check
from tests.sql.test_failures import free_port
from tests.support.mysql_server import MySqlServer
from tests.test_cli import run_enrich

pytestmark = pytest.mark.timeout(120)
WRONG = "wr0ng-MY-S3CRET-5e0f"


def write_job(tmp_path: Path, server: MySqlServer) -> Path:
    secret = tmp_path / "mysql_password"
    secret.write_text(server.password + "\n")
    wrong = tmp_path / "wrong_password"
    wrong.write_text(WRONG + "\n")
    base = f"mysql://enrich@127.0.0.1:{server.port}/enrich"
    job = tmp_path / "job.yaml"
    job.write_text(
        f"""
source: {{format: rate}}
stores:
  users: {{type: mysql, url: "{base}", password: "${{file:{secret}}}", table: users,
          key: id, schema: "name string, tier string", check_key: 1, timeout: 2}}
  accounts: {{kind: mysql, url: "{base}", password: "${{file:{secret}}}",
             table: accounts, key: [tenant, id], schema: "name string",
             check_key: [eu, 1]}}
  locked: {{type: mysql, url: "{base}", password: "${{file:{wrong}}}", table: users,
           key: id, schema: "name string"}}
  nowhere: {{type: mysql, url: "{base}", password: "${{file:{secret}}}", table: nowhere,
            key: id, schema: "name string"}}
  nocolumn: {{type: mysql, url: "{base}", password: "${{file:{secret}}}", table: users,
             key: id, schema: "nickname string"}}
  down: {{type: mysql, url: "mysql://enrich@127.0.0.1:{free_port()}/enrich",
         password: "${{file:{secret}}}", table: users, key: id, schema: "name string",
         timeout: 2}}
joins: [{{store: users, on: user_id}}]
"""
    )
    return job


def test_config_builds_mysql_stores_with_the_secret_file(
    tables: MySqlServer, tmp_path: Path
) -> None:
    config = _config.load(write_job(tmp_path, tables))

    users = config.stores["users"]
    assert isinstance(users, MySqlLookup) and isinstance(config.stores["accounts"], MySqlLookup)
    assert users == MySqlLookup(
        f"mysql://enrich:{tables.password}@127.0.0.1:{tables.port}/enrich",
        table="users", key="id", schema="name string, tier string", timeout=2,
    )  # fmt: skip
    assert tables.password not in repr(config.stores)


def test_check_names_each_failure_in_one_line_without_secrets(
    tables: MySqlServer, tmp_path: Path
) -> None:
    lines = {c.name: c for c in check(_config.load(write_job(tmp_path, tables)))}

    assert lines["users"].ok and "key 1 found" in lines["users"].detail
    assert lines["accounts"].ok and "found" in lines["accounts"].detail
    assert (
        not lines["locked"].ok and "refused the login for user 'enrich'" in lines["locked"].detail
    )
    assert not lines["nowhere"].ok and "Table 'enrich.nowhere' doesn't exist" in (
        lines["nowhere"].detail
    )
    assert not lines["nocolumn"].ok and "Unknown column 'nickname'" in lines["nocolumn"].detail
    assert not lines["down"].ok and "is unreachable" in lines["down"].detail
    for outcome in lines.values():
        assert "\n" not in outcome.line()
        assert tables.password not in outcome.line() and WRONG not in outcome.line()


def test_enrich_check_command(tables: MySqlServer, tmp_path: Path) -> None:
    done = run_enrich("check", str(write_job(tmp_path, tables)))

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
    assert tables.password not in done.stdout + done.stderr and WRONG not in done.stderr
