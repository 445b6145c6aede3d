"""A real S3 API on loopback for the tests: the bench's moto server (`bench.s3.MotoS3`, moto's
server mode from the package registry, in a process of its own), one per test process, a bucket
per test.

Its credentials are made up per session, handed to the product the standard way (the AWS
variables, ``AWS_ENDPOINT_URL`` for the endpoint) and recorded as secrets (`LEDGER`), so the
secrets scan looks for them in what the tests leave behind, the store's objects included:
`S3Server.mirror` copies a bucket under the test's directory, where the scan reads it.
"""

from __future__ import annotations

from pathlib import Path

from bench.s3 import MotoS3
from tests.support.leaks import LEDGER


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
