"""`make bench`, the object-store section: the warehouse on S3 against the same on local disk,
and against dlt on the same S3, side by side in one run.

The store is moto's S3 server (``python -m moto.server``) on loopback, in a process of its own
(`tests.support.s3.MotoS3`, the tests' own), with a bucket of the run's own and made-up
credentials, handed to every process the standard way (the AWS variables, ``AWS_ENDPOINT_URL``
for the endpoint). Loopback has no network latency: what it shows is what the S3 protocol costs
the writer (a PUT per partition, the lease's conditional writes, the requests around them), not
a real store's round trips.

Each contender runs in a process of its own, one after another, on the whole machine, as in
`bench.backfill`, and over the same funding history of the large scale (1,052,100 rows):

- ours, the pipeline alone (`bench.backfill`'s child: walk, normalize, partitions, catalog,
  checks) into a local directory, then into ``s3://<bucket>/ours`` (its catalog a local file, as
  a remote root's is);
- dlt 1.31's REST API source (`bench.dlt_peer`, the same source as the backfill section's)
  through its ``filesystem`` destination, Parquet loader, to ``s3://<bucket>/dlt``, its
  credentials and endpoint given to dlt as its `AwsCredentials`.

Then an analyst's catalog of each warehouse (`warehouse.catalog.refresh` with ``out``, then
`warehouse.catalog.connect`), timed on a one-day query and a whole-history aggregate; the two
warehouses must answer the same, or the section fails.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from bench import Figure
from bench.backfill import FROZEN_AT, _child, _env, _history_days, _ours
from bench.warehouse import BY_MARKET, ONE_DAY, REPEATS, timed_query
from pipeline import spec
from pipeline.simulator import spawn
from tests.support.s3 import MotoS3
from warehouse import Warehouse, catalog

SECTION: Final = "s3"
#: What the project asks: a backfill into S3 at most this many times as long as into local disk,
#: and ours on S3 at least this many times as fast as dlt on S3.
S3_OVER_LOCAL_GOAL: Final = 1.3
OURS_OVER_DLT_GOAL: Final = 2.0


@contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    """``variables`` set in this process's environment for the block, then as they were."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run() -> list[Figure]:
    first, last = _history_days()
    sim = spawn(scale="large", frozen_at=FROZEN_AT)
    with (
        sim,
        tempfile.TemporaryDirectory() as scratch,
        MotoS3(Path(scratch) / "moto.log") as store,
    ):
        base = Path(scratch)
        sim.control("limits", enabled=False)
        bucket = store.bucket()
        s3_root = f"s3://{bucket}/ours"
        # A remote root's catalog is a local file; here, the run's own rather than the user's.
        s3_env = store.env | {"WAREHOUSE_CATALOG": str(base / "ours-s3.duckdb")}
        local, local_s, local_mb = _ours(sim, first, last, base / "local", dagster=False)
        # Our client's window nonces run up to 4 s ahead of the clock (see bench.backfill): a run
        # right after another has its first ones refused, answered 429 and retried after a
        # pause, which the run into local disk, on a fresh simulator, never pays.
        time.sleep(spec.NONCE_WINDOW_MS / 1000)
        ours, ours_s, ours_mb = _ours(sim, first, last, s3_root, dagster=False, extra_env=s3_env)
        # Our client's window nonces run up to 4 s ahead of the clock (see bench.backfill).
        time.sleep(spec.NONCE_WINDOW_MS / 1000)
        creds = ["--url", sim.url, "--api-key", sim.credentials.api_key,
                 "--api-secret", sim.credentials.api_secret]  # fmt: skip
        peer, peer_s, peer_mb = _child(
            ["bench.dlt_peer", *creds, "--resource", "funding_history", "--destination",
             "parquet", "--out", str(base / "dlt"), "--bucket-url", f"s3://{bucket}/dlt"],
            _env(sim, first) | store.env,
        )  # fmt: skip
        with _environment(store.env):
            analyst = _analyst(base, base / "local", s3_root)
    truth = int(local["rows"])

    def complete(rows: int) -> str:
        return "complete" if rows == truth else f"INCOMPLETE: {rows:,} of {truth:,}"

    ours_rate, peer_rate = ours["rows"] / ours_s, peer["rows"] / peer_s
    over_local, over_dlt = ours_s / local_s, ours_rate / peer_rate

    def goal(met: bool) -> str:
        return "met" if met else "NOT MET"

    return [
        Figure(SECTION, f"funding backfill, {truth:,} rows, ours, the pipeline alone: into S3 "
               "(moto's server on loopback) against into local disk", ours_s, "s", local_s,
               "ours into local disk",
               f"lower is better; goal at most {S3_OVER_LOCAL_GOAL}x: "
               f"{goal(over_local <= S3_OVER_LOCAL_GOAL)}; S3 {complete(ours['rows'])}, peak "
               f"{ours_mb:.0f} MB, {ours['partitions']} partitions (a PUT each); local "
               f"{complete(local['rows'])}, peak {local_mb:.0f} MB"),
        Figure(SECTION, "  ours into S3 against dlt REST API source, filesystem destination on "
               "the same S3, Parquet loader", ours_rate, "rows/s", peer_rate,
               "dlt, filesystem destination on S3",
               f"goal at least {OURS_OVER_DLT_GOAL}x: {goal(over_dlt >= OURS_OVER_DLT_GOAL)}; "
               f"ours {ours_s:.1f} s; dlt {peer_s:.1f} s, {complete(peer['rows'])}, peak "
               f"{peer_mb:.0f} MB, epoch strings left as text"),
        *analyst,
    ]  # fmt: skip


def _analyst(base: Path, local_root: Path, s3_root: str) -> list[Figure]:
    """An analyst's catalog of each warehouse: its refresh, and two queries through its view,
    S3 against local disk; both must answer the same."""
    started = time.perf_counter()
    local_wh, s3_wh = Warehouse.open(local_root), Warehouse.open(s3_root)
    local_file = catalog.refresh(local_wh, out=base / "analyst-local.duckdb").path
    local_refresh_s = time.perf_counter() - started
    started = time.perf_counter()
    s3_file = catalog.refresh(s3_wh, out=base / "analyst-s3.duckdb").path
    s3_refresh_s = time.perf_counter() - started
    figures = [
        Figure(SECTION, "an analyst's catalog refresh (`catalog.refresh(root, out=...)`): S3 "
               "against local disk", s3_refresh_s * 1000, "ms", local_refresh_s * 1000,
               "the same on local disk",
               "lower is better; views only: each table's partitions listed, the views bound"),
    ]  # fmt: skip
    with (
        catalog.connect(local_wh, path=local_file) as local,
        catalog.connect(s3_wh, path=s3_file) as remote,
    ):
        middle = local.execute(  # the median day
            "SELECT funding_date FROM funding_history ORDER BY funding_date LIMIT 1 "
            "OFFSET (SELECT count(*) // 2 FROM funding_history)"
        ).fetchone()
        assert middle is not None
        for label, query in (
            (f"one-day query ({middle[0]}, all markets)", ONE_DAY.format(source="{source}",
                                                                          day=middle[0])),
            ("whole-history sum of funding by market", BY_MARKET),
        ):  # fmt: skip
            sql = query.format(source="funding_history")
            local_s, expected = timed_query(local, sql)
            s3_s, found = timed_query(remote, sql)
            if found != expected:
                raise AssertionError(f"{label}: S3 answered {found[:3]}, local {expected[:3]}")
            figures.append(
                Figure(SECTION, f"{label} through the view: S3 against local disk",
                       s3_s * 1000, "ms", local_s * 1000, "the same on local disk",
                       f"lower is better; median of {REPEATS}; the same answer ({len(found)} "
                       "rows); on S3 each query lists the month files and opens each one "
                       "through s3fs (the day is a column, not a path)"),
            )  # fmt: skip
    return figures
