"""A real S3 API on loopback: moto's server mode (from the package registry), in a process of its
own, for a whole test session; a bucket per test.

Its credentials are made up per session, handed to the product the standard way (the AWS
variables, ``AWS_ENDPOINT_URL`` for the endpoint) and recorded as secrets (`LEDGER`), so the
secrets scan looks for them in what the tests leave behind, the store's objects included:
`S3Server.mirror` copies a bucket under the test's directory, where the scan reads it.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Final

import s3fs

from tests.support.leaks import LEDGER

REGION: Final = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class S3Server:
    """moto's S3 server on 127.0.0.1, started at construction; `stop` ends it."""

    def __init__(self, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key_id = f"AKIA{secrets.token_hex(8).upper()}"
        self.secret = secrets.token_urlsafe(30)
        LEDGER.add(self.secret)
        self._log = log.open("wb")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's S3 server did not start: see {log}") from None
                time.sleep(0.05)

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
        """A filesystem of this server's for the test's own looks (listing cache off)."""
        return s3fs.S3FileSystem(
            key=self.key_id,
            secret=self.secret,
            endpoint_url=self.url,
            use_listings_cache=False,
            skip_instance_cache=True,
        )

    def bucket(self) -> str:
        """A new, empty bucket."""
        name = f"wh-{uuid.uuid4().hex[:12]}"
        self.filesystem().mkdir(name)
        return name

    def mirror(self, bucket: str, into: Path) -> Path:
        """Every object of ``bucket`` copied under ``into`` (for the secrets scan)."""
        fs = self.filesystem()
        into.mkdir(parents=True, exist_ok=True)
        for key in fs.find(bucket):
            target = into / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fs.cat_file(key))
        return into

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
