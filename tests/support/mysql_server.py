"""A real MariaDB (or MySQL) server for tests: started in a folder of its own, no service.

The server binary is Debian's ``mariadb-server`` package (``scripts/dev`` and ``.ci/run``
install it when missing; ``$ENRICH_MYSQL_SERVER`` names another ``mariadbd``/``mysqld``).
Each :class:`MySqlServer` initialises a data directory with ``mariadb-install-db``
(``mysqld --initialize-insecure`` for Oracle's MySQL), starts the server on a free
loopback port with its socket, pid file and log in that directory, waits until it takes
connections (polling with a deadline; a server that dies early fails with its log tail),
then creates the test user, password and database. ``stop()``/``start()``/``restart()``
keep the port and the data, so clients configured with :attr:`url` reach the restarted
server and find their tables again.

When no server binary can be had, :func:`server_binaries` raises :class:`MySqlUnavailable`
saying how to get one, and the fixtures skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.redis_server import free_port, make_test_certificates

STARTUP_TIMEOUT = 60.0
_POLL_INTERVAL = 0.05
_FORBIDDEN_PORTS = {3306}  # a server we must not depend on may run there
# Where Debian puts the server, outside a non-root user's PATH.
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin")

# Distinctive secrets, so a test can prove they appear nowhere.
TEST_USER = "enrich"
TEST_PASSWORD = "myS3CRET-pw-4c91e7"
TEST_DATABASE = "enrich"


class MySqlUnavailable(RuntimeError):
    """No MariaDB/MySQL server binary here: the tests that need one skip."""


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in _SBIN:
        candidate = Path(folder) / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def server_binaries() -> tuple[str, str | None]:
    """``(server, install_db)``: the server executable and the data-directory initialiser
    (None: the server initialises itself, MySQL's ``--initialize-insecure``).

    Raises:
        MySqlUnavailable: no server binary; the message says how to get one.
    """
    configured = os.environ.get("ENRICH_MYSQL_SERVER")
    if configured:
        if not os.access(configured, os.X_OK):
            raise MySqlUnavailable(f"ENRICH_MYSQL_SERVER={configured!r} is not an executable")
        server = configured
    else:
        server = _which("mariadbd") or _which("mysqld") or ""
    if not server:
        raise MySqlUnavailable(
            "no MariaDB/MySQL server binary (mariadbd, mysqld): 'apt-get install "
            "mariadb-server' (./scripts/dev test does it when run as root), or set "
            "ENRICH_MYSQL_SERVER=/path/to/mariadbd"
        )
    installer = _which("mariadb-install-db") or _which("mysql_install_db")
    return server, installer


@dataclass
class MySqlServer:
    """A MariaDB/MySQL server on 127.0.0.1:port with its own data directory.

    ``url`` is ``mysql://enrich:PASSWORD@127.0.0.1:PORT/enrich``; the user may do anything
    in that database. ``stop()`` and ``start()`` may be repeated.
    """

    directory: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    user: str = TEST_USER
    password: str = field(default=TEST_PASSWORD, repr=False)
    database: str = TEST_DATABASE
    # Serve TLS too (a test CA and a server certificate for ``host``, made with openssl).
    tls: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"mysql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed a TLS server's certificate."""
        return self.directory / "ca.crt"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def socket_path(self) -> Path:
        return self.directory / "mysqld.sock"

    @property
    def log_path(self) -> Path:
        return self.directory / "mysqld.log"

    def start(self) -> MySqlServer:
        """Start the server (initialising its data directory the first time) and wait
        until it takes connections; create the test user and database the first time."""
        if self.port in _FORBIDDEN_PORTS:
            raise ValueError(f"refusing to start a test MySQL on port {self.port}")
        server, installer = server_binaries()
        self.directory.mkdir(parents=True, exist_ok=True)
        first = not self.data_dir.exists()
        if self.tls and not self.ca_file.exists():
            make_test_certificates(self.directory, self.host)
        if first:
            self._initialise(server, installer)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [server, "--no-defaults", *self._options()],
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            self._wait_until_up()
            if first:
                self._create_user()
        except BaseException:
            self.kill()
            raise
        return self

    def _run_as(self) -> list[str]:
        # mariadbd refuses to run as root unless told so; as root, say so rather than
        # handing the (root-only) pytest temp folder to the mysql user.
        return ["--user=root"] if os.geteuid() == 0 else []

    def _initialise(self, server: str, installer: str | None) -> None:
        self.data_dir.mkdir(parents=True)
        if installer is not None:
            command = [
                installer, "--no-defaults", f"--datadir={self.data_dir}",
                "--auth-root-authentication-method=normal", "--skip-test-db",
                *self._run_as(),
            ]  # fmt: skip
        else:  # Oracle's MySQL 5.7+: the server initialises an empty data directory.
            command = [
                server, "--no-defaults", "--initialize-insecure",
                f"--datadir={self.data_dir}", *self._run_as(),
            ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, timeout=STARTUP_TIMEOUT)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise RuntimeError(f"{command[0]} failed ({done.returncode}):\n{output}")

    def _options(self) -> list[str]:
        return [
            f"--datadir={self.data_dir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--socket={self.socket_path}",
            f"--pid-file={self.directory / 'mysqld.pid'}",
            f"--log-error={self.log_path}",
            "--skip-name-resolve",
            # Small and quick: a test server holds a few thousand rows.
            "--innodb-buffer-pool-size=32M",
            "--performance-schema=OFF",
            # A throwaway server: no fsync per commit (a test table is rebuilt each time).
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--skip-log-bin",
            "--max-connections=500",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            *self._tls_options(),
            *self._run_as(),
        ]

    def _tls_options(self) -> list[str]:
        if not self.tls:
            return []
        return [
            f"--ssl-ca={self.ca_file}",
            f"--ssl-cert={self.directory / 'server.crt'}",
            f"--ssl-key={self.directory / 'server.key'}",
        ]

    def admin(self, **kwargs: Any) -> Any:
        """A PyMySQL connection as root over the server's socket."""
        import pymysql

        return pymysql.connect(
            unix_socket=str(self.socket_path), user="root", autocommit=True, **kwargs
        )

    def connect(self, **kwargs: Any) -> Any:
        """A PyMySQL connection as the test user to the test database, autocommit."""
        import pymysql

        options: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "autocommit": True,
            "connect_timeout": 10,
        }
        options.update(kwargs)
        return pymysql.connect(**options)

    def execute(self, sql: str, args: Any = None, *, many: bool = False) -> list[tuple[Any, ...]]:
        """Run one statement as the test user (``many``: executemany); its rows."""
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                if many:
                    cursor.executemany(sql, args)
                else:
                    cursor.execute(sql, args)
                return list(cursor.fetchall())
        finally:
            connection.close()

    query = execute  # the name some tests reach for

    def sql(self, script: str) -> None:
        """Run a script of statements separated by ``;`` as the test user."""
        from pymysql.constants import CLIENT

        connection = self.connect(client_flag=CLIENT.MULTI_STATEMENTS)
        try:
            with connection.cursor() as cursor:
                cursor.execute(script)
                while cursor.nextset():
                    pass
        finally:
            connection.close()

    def _create_user(self) -> None:
        connection = self.admin()
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
                cursor.execute(
                    f"CREATE USER IF NOT EXISTS '{self.user}'@'%%' IDENTIFIED BY %s",
                    (self.password,),
                )
                cursor.execute(f"GRANT ALL ON `{self.database}`.* TO '{self.user}'@'%'")
        finally:
            connection.close()

    def _wait_until_up(self) -> None:
        import pymysql

        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the MySQL server exited with {self.process.returncode} during "
                    f"start-up; log tail:\n{self.log_tail()}"
                )
            # A raw probe first: PyMySQL leaks its socket when the connect itself fails.
            if self._accepts():
                with contextlib.suppress(pymysql.err.OperationalError, OSError):
                    self.admin(connect_timeout=2).close()
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the MySQL server on port {self.port} is not up after "
                    f"{STARTUP_TIMEOUT}s; log tail:\n{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

    def _accepts(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            try:
                probe.connect(str(self.socket_path))
            except OSError:
                return False
            return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop the server (SIGTERM: a clean shutdown; SIGKILL after 30 s)."""
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port; the data stays."""
        self.stop()
        self.start()
