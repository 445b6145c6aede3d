"""A real S3 API on loopback: moto's server mode (from the package registry, in a process of its
own) with made-up credentials (`MotoS3`, which `make bench` takes from here too); for the tests,
one per test process, a bucket per test.

Its credentials are made up per session, handed to the product the standard way (the AWS
variables, ``AWS_ENDPOINT_URL`` for the endpoint) and recorded as secrets (`LEDGER`), so the
secrets scan looks for them in what the tests leave behind, the store's objects included:
`S3Server.mirror` copies a bucket under the test's directory, where the scan reads it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import pytest
import s3fs

from assets.service import free_port
from tests.support.leaks import LEDGER
from warehouse.listed_s3 import ListedS3FileSystem

#: The region the AWS variables name.
REGION: Final = "us-east-1"


class MotoS3:
    """moto's S3 server on 127.0.0.1, started at construction with made-up credentials; `stop`
    (or the end of a ``with`` block) ends it."""

    def __init__(self, log: Path, *, timeout_s: float = 30) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key_id = f"AKIA{secrets.token_hex(8).upper()}"
        self.secret = secrets.token_urlsafe(30)
        self._log = log.open("wb")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's S3 server did not start: see {log}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        """The server's process id (to stop it, as a hung store, and to start it again)."""
        return self._process.pid

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a process at this server."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }

    def filesystem(self) -> s3fs.S3FileSystem:
        """A filesystem of this server's (listing cache off)."""
        return s3fs.S3FileSystem(
            key=self.key_id,
            secret=self.secret,
            endpoint_url=self.url,
            use_listings_cache=False,
            skip_instance_cache=True,
        )

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"bench-{uuid.uuid4().hex[:12]}"
        self.filesystem().mkdir(name)
        return name

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def fresh_s3_filesystems() -> None:
    """The S3 filesystems fsspec keeps in this process, forgotten: it keeps one per storage
    options, bound to the endpoint and credentials the AWS variables named when it was made, so
    a test that changes those variables in this process makes them anew."""
    s3fs.S3FileSystem.clear_instance_cache()
    ListedS3FileSystem.clear_instance_cache()


class S3Server(MotoS3):
    """moto's S3 server on 127.0.0.1, its secret recorded for the secrets scan."""

    def __init__(self, log: Path) -> None:
        super().__init__(log)
        LEDGER.add(self.secret)

    def mirror(self, bucket: str, into: Path) -> Path:
        """Every object of ``bucket`` copied under ``into`` (for the secrets scan)."""
        fs = self.filesystem()
        into.mkdir(parents=True, exist_ok=True)
        for key in fs.find(bucket):
            target = into / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fs.cat_file(key))
        return into

    def point_here(self, patch: pytest.MonkeyPatch) -> None:
        """This process's AWS variables pointing at this server, through ``patch``, and its S3
        filesystems made anew (`fresh_s3_filesystems`)."""
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            patch.delenv(name)
        for name, value in self.env.items():
            patch.setenv(name, value)
        fresh_s3_filesystems()
