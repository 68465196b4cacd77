"""A throwaway PostgreSQL server for the tests, the demo and the benchmarks.

:class:`PostgresServer` runs Debian's (or any) PostgreSQL binaries in a folder of its
own: ``initdb`` into a fresh data directory, ``postgres`` on a free loopback port with
its socket in that directory, a password user and a database, and ``pg_ctl stop`` at
the end. No system service is used or touched, and nothing is installed.

Which binaries, first match wins: ``$ENRICH_PG_BIN`` (a folder holding ``initdb``,
``pg_ctl``, ``postgres``), the folder ``pg_config --bindir`` names, the newest
``/usr/lib/postgresql/N/bin`` (Debian's layout), ``initdb`` on PATH. ``apt-get install
postgresql`` (what ``scripts/dev`` does when it runs as root and finds none) brings them.

PostgreSQL refuses to run as root. Run as root, the server runs as the ``postgres``
system user (which Debian's package creates; ``enrichpg`` is created when there is none),
through ``runuser``; its folder is then made in the system's temporary folder and owned
by that user, since a root-only parent (pytest's ``tmp_path``) would hide it.

Guarantees: :meth:`PostgresServer.start` returns once the server accepts connections
(``pg_ctl start -w``: it waits for the server to say so, not for a fixed time), or raises
:class:`PostgresUnavailable` with the end of the server's log; :meth:`stop` and
:meth:`restart` keep the data and the port, so a client may reconnect to the same URL.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

__all__ = ("PostgresServer", "PostgresUnavailable", "postgres_bindir")

DEFAULT_USER = "enrich"
DEFAULT_PASSWORD = "pg-S3CRET-5e1d7a"  # distinctive, so tests can prove it appears nowhere
DEFAULT_DATABASE = "enrich"
_START_SECONDS = 60


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries, or the server would not start (the message says which)."""


def postgres_bindir() -> Path:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres`` (see the module docstring).

    Raises:
        PostgresUnavailable: none found; the message says how to get them.
    """
    configured = os.environ.get("ENRICH_PG_BIN")
    candidates: list[Path] = [Path(configured)] if configured else []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            done = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False
            )
            candidates.append(Path(done.stdout.strip()))
        except (OSError, subprocess.TimeoutExpired):
            pass
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    candidates += [Path(p) for p in debian]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if all(os.access(folder / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    if configured:
        raise PostgresUnavailable(f"ENRICH_PG_BIN={configured!r} holds no initdb/pg_ctl/postgres")
    raise PostgresUnavailable(
        "no PostgreSQL server binaries found: 'apt-get install postgresql' (Debian; "
        "./scripts/dev does it when run as root), or set ENRICH_PG_BIN to a folder "
        "holding initdb, pg_ctl and postgres"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server_user() -> str | None:
    """The user to run the server as when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "enrichpg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "enrichpg"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return "enrichpg"


class PostgresServer:
    """One PostgreSQL server in a folder of its own (see the module docstring).

    Attributes:
        port: the loopback port (kept across restarts).
        user, password, database: the login the server was made with.
        url: ``postgresql://user:password@127.0.0.1:port/database``.
    """

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        user: str = DEFAULT_USER,
        password: str = DEFAULT_PASSWORD,
        database: str = DEFAULT_DATABASE,
        port: int | None = None,
    ) -> None:
        self.bindir = postgres_bindir()
        self.run_as = _server_user()
        if self.run_as is not None or folder is None:
            # A folder the server's user can reach: its parent must not be root-only.
            self.folder = Path(tempfile.mkdtemp(prefix="enrich-pg-"))
            self._own_folder = True
        else:
            self.folder = Path(folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            self._own_folder = False
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.user, self.password, self.database = user, password, database
        self.port = port or _free_port()
        self._initialized = False

    @property
    def url(self) -> str:
        return (
            f"postgresql://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@127.0.0.1:{self.port}/{quote(self.database, safe='')}"
        )

    def _run(self, *args: str, timeout: float = _START_SECONDS) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=self.folder,
        )

    def _init(self) -> None:
        if self.run_as is not None:
            shutil.chown(self.folder, self.run_as)
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.run_as is not None:
            shutil.chown(pwfile, self.run_as)
        pwfile.chmod(0o600)
        try:
            done = self._run(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {done.stderr.strip()[-2000:]}")
        with open(self.data / "postgresql.conf", "a") as conf:
            # Loopback only, the socket in our own folder, and a test server's durability.
            conf.write(
                "\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.folder}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 200\nshared_buffers = 128MB\n"
            )
        self._initialized = True

    def start(self) -> PostgresServer:
        """Start the server (made on the first call), waiting until it accepts connections.

        Raises:
            PostgresUnavailable: it did not start; the message holds its log's end.
        """
        first = not self._initialized
        if first:
            self._init()
        done = self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(_START_SECONDS),
            "-o",
            f"-p {self.port}",
            "start",
            timeout=_START_SECONDS + 10,
        )
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"postgres did not start on port {self.port}: {done.stdout.strip()} "
                f"{done.stderr.strip()}\n{self.log_tail()}"
            )
        if first and self.database != "postgres":
            self.sql(f'CREATE DATABASE "{self.database}"', database="postgres")
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended); data and port stay."""
        if self._initialized and (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """Stop and start again on the same port, with the same data."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its folder (when it made the folder itself)."""
        self.stop()
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def sql(self, statement: str, *, database: str | None = None) -> str:
        """Run ``statement`` with ``psql`` over the server's socket; its output, unaligned.

        Raises:
            RuntimeError: psql failed (the message holds its error).
        """
        psql = self.bindir / "psql"
        env_password = {"PGPASSWORD": self.password}
        command = [
            str(psql),
            "-h",
            str(self.folder),
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            database or self.database,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            statement,
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, **env_password},
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresServer(127.0.0.1:{self.port}, user={self.user!r}, db={self.database!r})"
