"""A real S3 API on loopback for the tests: the bench's moto server (`bench.s3.MotoS3`, moto's
server mode from the package registry, in a process of its own), one per test process, a bucket
per test.

Its credentials are made up per session, handed to the product the standard way (the AWS
variables, ``AWS_ENDPOINT_URL`` for the endpoint) and recorded as secrets (`LEDGER`), so the
secrets scan looks for them in what the tests leave behind, the store's objects included:
`S3Server.mirror` copies a bucket under the test's directory, where the scan reads it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import s3fs

from bench.s3 import MotoS3
from tests.support.leaks import LEDGER
from warehouse.listed_s3 import ListedS3FileSystem


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
