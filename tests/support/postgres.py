"""A throwaway PostgreSQL server from Debian's binaries, for the service tests and `make bench`
(which takes it from here):
its own data directory, a free loopback port, a password of its own, one database per caller.

``initdb`` refuses to run as root, and so does ``postgres``: as root, both run as the ``postgres``
user that Debian's package creates, in a data directory handed to that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from assets.service import free_port

USER: Final = "whitebit"
#: Debian's PostgreSQL binaries (scripts/ensure-postgres installs them).
BIN_GLOB: Final = "/usr/lib/postgresql/*/bin"
#: The system user that runs the server when we are root.
SYSTEM_USER: Final = "postgres"


def _bin() -> Path:
    found = sorted(glob.glob(BIN_GLOB), key=lambda p: int(Path(p).parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run scripts/ensure-postgres")
    return Path(found[-1])


class LocalPostgres:
    """``with LocalPostgres() as pg: url = pg.new_database()``."""

    def __init__(self, *, durable: bool = True) -> None:
        self.durable = durable
        self.port = free_port()
        self.password = secrets.token_urlsafe(16)
        self._dir = Path(tempfile.mkdtemp(prefix="whitebit-postgres-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            account = pwd.getpwnam(SYSTEM_USER)
            os.chown(self._dir, account.pw_uid, account.pw_gid)
            self._as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def _run(self, *args: str) -> None:
        done = subprocess.run(list(args), capture_output=True, text=True, check=False, **self._as)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr[-2000:]}")

    def start(self) -> Self:
        bin_dir, data = _bin(), self._dir / "data"
        password_file = self._dir / "password"
        password_file.write_text(self.password, encoding="utf-8")
        if self._as:
            os.chown(password_file, self._as["user"], self._as["group"])
        self._run(
            str(bin_dir / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={password_file}",
            "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8",
        )  # fmt: skip
        password_file.unlink()
        return self._serve()

    def _serve(self) -> Self:
        bin_dir, data = _bin(), self._dir / "data"
        options = ["-c", "fsync=off", "-c", "synchronous_commit=off"] if not self.durable else []
        with (self._dir / "server.log").open("ab") as log:
            self._process = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self._dir}",
                 "-c", "max_connections=200", *options],
                stdout=subprocess.DEVNULL, stderr=log, **self._as,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                self._connect("postgres").close()
                return self
            except Exception:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    said = (self._dir / "server.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(f"PostgreSQL did not start:\n{said}") from None
                time.sleep(0.2)

    def _connect(self, database: str) -> Any:
        import psycopg2

        return psycopg2.connect(
            host="127.0.0.1", port=self.port, user=USER, password=self.password, dbname=database
        )

    def url(self, database: str, *, driver: str = "+psycopg2") -> str:
        """The database's URL, by default as SQLAlchemy (and so Dagster) takes it: with the
        driver that dagster-postgres installs, psycopg2 (SQLAlchemy 2.1 would pick psycopg 3);
        ``driver=""`` for libpq's own form."""
        return f"postgresql{driver}://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "whitebit") -> str:
        """A new, empty database; its name."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        connection = self._connect("postgres")
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return name

    def halt(self) -> None:
        """Stop the server (a fast shutdown: clients are cut off), keeping its data: `resume`
        starts it again, on the same port."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def resume(self) -> Self:
        """Start the server `halt` stopped again."""
        return self._serve()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
