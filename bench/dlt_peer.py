"""The dlt peer: the extraction a data team would build with dlt instead of our product.

It exists for an honest side-by-side benchmark. It is dlt 1.31's REST API source, configured as
well as dlt allows for this API: POST endpoints with ``offset``/``limit`` in the JSON body (the
offset paginator's body paths), ``records`` as the data selector, an `AuthConfigBase` subclass
that signs every request the WhiteBIT way (docs/api.md, section 10), decimal hints for the
money columns, and dlt's fastest loader: Parquet files, either on the ``filesystem`` destination
(a local directory, or an S3 bucket with ``--bucket-url s3://bucket/prefix``: the credentials,
region and endpoint of the standard AWS variables handed to dlt as its `AwsCredentials`) or
loaded into ``duckdb``.

Two resources show the two things a comparison needs:

- ``funding_history``: no ``total`` in the answer, newest first; paging stops on a short page.
- ``investments`` (``status`` 1): the API refuses ``offset`` above 10,000. Without a cap the run
  fails at the 400 and loads nothing; a dlt user who met the 400 sets ``maximum_offset``, and dlt
  then ends early *without an error or warning*, holding only the first 10,100 rows of a slice
  that is larger (17,910 at the simulator's ``large`` scale). (``maximum_offset`` is exclusive:
  10,000 stops at 10,000 rows; 10,100 is what reaches the last page the API serves.)

What dlt makes of the data, as measured: money columns become ``decimal128(38,18)`` (exact, given
the hints below); ``fundingTime``/``rateCalculatedTime`` (epoch seconds as strings) stay text and
the investments' ``created``/``updated``/``paymentTime`` stay ``int64``: dlt does not turn epoch
values into timestamps. The nested ``plan`` object is flattened into ``plan__*`` columns, and
camelCase names become snake_case.

A limit to know: dlt retries (429, 5xx, dropped connections) by re-sending the request it already
prepared, so a retry carries a spent nonce, and the exchange refuses it (429, then 400 once the
5 s window has passed). Under faults this peer fails; the benchmark runs it without faults.

Run once per process, so peak memory is the run's own::

    python -m bench.dlt_peer --url URL --api-key K --api-secret S \\
        --resource funding_history --destination parquet --out DIR [--max-rows N] \\
        [--bucket-url s3://bucket/prefix]

It prints one JSON line on stdout (rows counted from what landed in the destination, wall
seconds, peak RSS, notes); dlt's logs go to stderr. Only ``bench`` imports this module: the
product never imports dlt.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from resource import RUSAGE_SELF, getrusage
from typing import Any, Final, Literal, Protocol

import dlt
from dlt.common.configuration import configspec
from dlt.common.typing import TSecretStrValue
from dlt.sources.helpers.rest_client.auth import AuthConfigBase
from dlt.sources.helpers.rest_client.paginators import OffsetPaginator
from dlt.sources.rest_api import rest_api_source
from dlt.sources.rest_api.typing import RESTAPIConfig

from pipeline import spec

Resource = Literal["funding_history", "investments"]
Destination = Literal["parquet", "duckdb"]
RESOURCES: Final[tuple[Resource, ...]] = ("funding_history", "investments")
DESTINATIONS: Final[tuple[Destination, ...]] = ("parquet", "duckdb")

PAGE_LIMIT: Final = 100  # the most either endpoint serves per page
#: The investments history refuses a larger offset (400 "Validation failed").
INVESTMENTS_MAX_OFFSET: Final = spec.INVESTMENTS_HISTORY.param("offset").maximum or 10_000
#: The investments slice the benchmark reads: active investments.
INVESTMENTS_STATUS: Final = 1
DATASET: Final = "whitebit"
DUCKDB_FILE: Final = "dlt_peer.duckdb"
#: Exact money: as wide as DuckDB's and Parquet's decimal128 allow, 18 places as the API sends.
MONEY_PRECISION: Final = 38
MONEY_SCALE: Final = 18


class ApiCredentials(Protocol):
    """A key and its secret (the simulator's `Credentials` is one)."""

    @property
    def api_key(self) -> str: ...

    @property
    def api_secret(self) -> str: ...


# --- Signing ------------------------------------------------------------------------------


class _Nonces:
    """Strictly increasing millisecond nonces for one process.

    With ``nonceWindow: true`` the exchange wants a millisecond time within 5 s of its clock that
    never repeats; dlt sends one request at a time, so the wall clock, bumped by one when two
    requests fall in the same millisecond, keeps well inside the window. The window (rather than
    "greater than the last nonce of this key") keeps this process independent of whatever nonces
    other clients of the same key sent before it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns() // 1_000_000)
            return self._last


_NONCES: Final = _Nonces()


@configspec
class WhiteBitAuth(AuthConfigBase):  # type: ignore[misc,unused-ignore]  # Any without dlt
    """Signs a private WhiteBIT v4 request, after the paginator has written its body.

    requests has already serialized the JSON body (with the paginator's ``offset`` and ``limit``)
    when an auth object is called, so this parses it back, adds ``request`` (the path) and a
    fresh ``nonce``, serializes it compactly and sends exactly those bytes: the exchange checks
    that the body is the same JSON as the signed payload. Called once per page, as dlt prepares
    each request anew.
    """

    # dlt's convention: None until resolved; dlt refuses to run with a required field unset.
    api_key: TSecretStrValue = None  # type: ignore[assignment,unused-ignore]
    api_secret: TSecretStrValue = None  # type: ignore[assignment,unused-ignore]

    # The argument is a requests.PreparedRequest; requests ships no type information here.
    def __call__(self, request: Any) -> Any:
        body = json.loads(request.body) if request.body else {}
        body["request"] = request.path_url.split("?", 1)[0]
        body["nonce"] = str(_NONCES.next())  # the spec carries the nonce as a string
        body["nonceWindow"] = True
        raw = json.dumps(body, separators=(",", ":")).encode()
        payload = base64.b64encode(raw)
        request.body = raw
        request.prepare_content_length(raw)
        request.headers["Content-Type"] = "application/json"
        request.headers["X-TXC-APIKEY"] = self.api_key
        request.headers["X-TXC-PAYLOAD"] = payload.decode()
        request.headers["X-TXC-SIGNATURE"] = hmac.new(
            str(self.api_secret).encode(), payload, hashlib.sha512
        ).hexdigest()
        return request


# --- Paging -------------------------------------------------------------------------------


class ShortPageOffsetPaginator(OffsetPaginator):  # type: ignore[misc,unused-ignore]  # as above
    """dlt's offset paginator, also stopping on a page shorter than the limit.

    Funding history has no ``total``; its last page is the short one. dlt's own paginator stops
    only on an *empty* page (one request more) or on ``maximum_offset``; this is the documented
    way to extend it: `update_state` sets ``_has_next_page``.
    """

    def update_state(self, response: Any, data: list[Any] | None = None) -> None:
        super().update_state(response, data)
        if data is not None and len(data) < self.limit:
            self._has_next_page = False


def _paginator(maximum_offset: int | None) -> ShortPageOffsetPaginator:
    return ShortPageOffsetPaginator(
        limit=PAGE_LIMIT,
        offset_body_path="offset",
        limit_body_path="limit",
        total_path=None,  # neither endpoint answers a total
        # dlt stops once the *next* offset reaches this value: the page at this offset is not
        # requested. So N rows take maximum_offset = N (for N a multiple of the limit).
        maximum_offset=maximum_offset,
    )


# --- The source -----------------------------------------------------------------------------


def _money_hints(fields: tuple[spec.Field, ...], prefix: str = "") -> dict[str, Any]:
    """Decimal column hints for every money field of the spec, under dlt's flattened names."""
    hints: dict[str, Any] = {}
    for f in fields:
        if f.type is spec.FieldType.DECIMAL:
            hints[prefix + f.name] = {
                "data_type": "decimal",
                "precision": MONEY_PRECISION,
                "scale": MONEY_SCALE,
            }
        elif f.type is spec.FieldType.OBJECT:
            # dlt flattens a nested object into ``<parent>__<child>`` columns of the same table
            # (and normalizes hint names to snake_case as it does the data's).
            hints |= _money_hints(f.fields, f"{prefix}{f.name}__")
    return hints


def _maximum_offset(resource_name: Resource, max_rows: int | None) -> int | None:
    """The paginator's ``maximum_offset``: the row cap asked for, and the API's offset cap."""
    caps: list[int] = []
    if max_rows is not None:
        # Whole pages: dlt counts offsets, not rows.
        caps.append(-(-max_rows // PAGE_LIMIT) * PAGE_LIMIT)
    if resource_name == "investments":
        # What a dlt user sets after the first 400 at offset 10,100: the last offset the API
        # accepts is 10,000, and dlt does not request the page at ``maximum_offset`` itself.
        caps.append(INVESTMENTS_MAX_OFFSET + PAGE_LIMIT)
    return min(caps) if caps else None


def build_source(
    url: str,
    credentials: ApiCredentials,
    resource_name: Resource,
    *,
    max_rows: int | None = None,
    market: str | None = None,
) -> Any:
    """The dlt REST API source holding the one resource asked for."""
    fields: tuple[spec.Field, ...]
    if resource_name == "funding_history":
        path, fields = spec.FUNDING_HISTORY.path, spec.FUNDING_ENTRY_FIELDS
        body: dict[str, Any] = {} if market is None else {"market": market}
    else:
        path, fields = spec.INVESTMENTS_HISTORY.path, spec.INVESTMENT_FIELDS
        body = {"status": INVESTMENTS_STATUS}
    config: RESTAPIConfig = {
        "client": {
            "base_url": url.rstrip("/") + "/",
            "auth": WhiteBitAuth(api_key=credentials.api_key, api_secret=credentials.api_secret),
        },
        # Plain appends: no merge keys, no deduplication, dlt's cheapest write.
        "resource_defaults": {"write_disposition": "append"},
        "resources": [
            {
                "name": resource_name,
                "columns": _money_hints(fields),
                "endpoint": {
                    "path": path.lstrip("/"),
                    "method": "POST",
                    "json": body,
                    "paginator": _paginator(_maximum_offset(resource_name, max_rows)),
                    "data_selector": "records",
                },
            }
        ],
    }
    return rest_api_source(config, name="whitebit")


# --- Running and counting -------------------------------------------------------------------


def _s3_credentials() -> Any:
    """dlt's S3 credentials from the standard AWS variables, the endpoint too (an S3-compatible
    store): dlt reads its own configuration names, not these, and no endpoint from the
    environment."""
    from dlt.common.configuration.specs import AwsCredentials

    env = os.environ
    return AwsCredentials(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
        endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
    )


def _files_url(out_dir: Path, bucket_url: str | None) -> str:
    """Where the filesystem destination writes: the bucket given, else ``out_dir/files``."""
    return bucket_url if bucket_url is not None else (out_dir / "files").as_uri()


def _destination(destination: Destination, out_dir: Path, bucket_url: str | None = None) -> Any:
    if destination == "parquet":
        credentials = _s3_credentials() if bucket_url is not None else None
        return dlt.destinations.filesystem(
            bucket_url=_files_url(out_dir, bucket_url), credentials=credentials
        )
    # Not named after the dataset: DuckDB would see catalog "whitebit" and schema "whitebit" and
    # refuse the ambiguous name.
    return dlt.destinations.duckdb(str(out_dir / DUCKDB_FILE))


def _parquet_table(files_url: str, table: str) -> tuple[int, dict[str, str]]:
    """Rows and column types of a table the filesystem destination wrote under ``files_url`` (a
    local directory's ``file://`` URL, or ``s3://bucket/prefix``)."""
    import fsspec
    import pyarrow.parquet as pq

    options: dict[str, Any] = {}
    if files_url.startswith("s3://"):
        options = {**_s3_credentials().to_s3fs_credentials(), "use_listings_cache": False}
    fs, prefix = fsspec.core.url_to_fs(files_url, **options)
    files = sorted(fs.glob(f"{prefix.rstrip('/')}/{DATASET}/{table}/*.parquet"))
    rows, types = 0, dict[str, str]()
    for path in files:
        with fs.open(path, "rb") as source:
            metadata = pq.ParquetFile(source).metadata
            rows += metadata.num_rows
            types = types or {f.name: str(f.type) for f in metadata.schema.to_arrow_schema()}
    return rows, types


def _duckdb_table(out_dir: Path, table: str) -> tuple[int, dict[str, str]]:
    """Rows and column types of a table loaded into DuckDB."""
    import duckdb

    with duckdb.connect(str(out_dir / DUCKDB_FILE), read_only=True) as con:
        # Both names are this module's constants, not input.
        found = con.execute(f'SELECT count(*) FROM "{DATASET}"."{table}"').fetchone()  # noqa: S608
        columns = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
            [DATASET, table],
        ).fetchall()
    return (int(found[0]) if found else 0), {str(n): str(t) for n, t in columns}


def run(
    url: str,
    credentials: ApiCredentials,
    resource: Resource,
    destination: Destination,
    out_dir: Path | str,
    max_rows: int | None = None,
    *,
    market: str | None = None,
    expected: int | None = None,
    bucket_url: str | None = None,
) -> dict[str, Any]:
    """Extract one resource with dlt into ``out_dir`` once; what landed, how fast, how big.

    ``out_dir`` must be empty or missing: dlt keeps pipeline state there, and a second run would
    append to (and be timed against) the first. ``expected`` is the complete row count, when the
    caller knows it (the simulator's truth); it is echoed as ``complete_expected``.
    ``bucket_url`` (``s3://bucket/prefix``, holding nothing yet): the Parquet destination's files
    go there instead of ``out_dir``, which keeps dlt's state and load packages.
    """
    if resource not in RESOURCES:
        raise ValueError(f"resource {resource!r}: one of {', '.join(RESOURCES)}")
    if destination not in DESTINATIONS:
        raise ValueError(f"destination {destination!r}: one of {', '.join(DESTINATIONS)}")
    if bucket_url is not None and destination != "parquet":
        raise ValueError("a bucket URL is for the parquet (filesystem) destination")
    out = Path(out_dir).resolve()
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: dlt would resume or append to an earlier run")
    out.mkdir(parents=True, exist_ok=True)
    # dlt phones home with usage telemetry unless told not to; a benchmark must not wait on it.
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    # Extract spools every page to an intermediate file that normalize reads back once; dlt
    # gzips it by default, which costs the single core more than the disk it saves.
    os.environ.setdefault("DATA_WRITER__DISABLE_COMPRESSION", "true")

    started = time.perf_counter()
    pipeline = dlt.pipeline(
        pipeline_name=f"dlt_peer_{resource}",
        pipelines_dir=str(out / "pipelines"),  # dlt's state and load packages stay in out_dir
        destination=_destination(destination, out, bucket_url),
        dataset_name=DATASET,
    )
    source = build_source(url, credentials, resource, max_rows=max_rows, market=market)
    pipeline.run(source, loader_file_format="parquet")
    seconds = time.perf_counter() - started

    trace = pipeline.last_trace
    steps = ", ".join(
        f"{t.step} {(t.finished_at - t.started_at).total_seconds():.2f}s"
        for t in (trace.steps if trace is not None else [])
        if t.finished_at is not None
    )
    if destination == "parquet":
        rows, types = _parquet_table(_files_url(out, bucket_url), resource)
    else:
        rows, types = _duckdb_table(out, resource)
    where = f" on {bucket_url.split('://', 1)[0]}" if bucket_url is not None else ""
    notes = [
        f"dlt {dlt.__version__}, REST API source, {destination} destination{where}, parquet loader",
        f"maximum_offset={_maximum_offset(resource, max_rows)}, limit {PAGE_LIMIT}, "
        "stops on a short or empty page",
        f"dlt steps: {steps}",
        "column types: " + ", ".join(f"{n} {t}" for n, t in types.items()),
    ]
    if resource == "investments" and max_rows is None:
        notes.append(
            f"investments status={INVESTMENTS_STATUS}: dlt stops at maximum_offset without an "
            f"error; at most {INVESTMENTS_MAX_OFFSET + PAGE_LIMIT} rows are reachable this way"
        )
    if expected is not None and rows != expected:
        notes.append(f"incomplete: {rows} of {expected} rows ({expected - rows} missing)")
    return {
        "rows": rows,
        "seconds": round(seconds, 3),
        "complete_expected": expected,
        # Linux reports kilobytes. dlt normalizes (one worker: no process pool) and loads
        # (threads) in this process, so RUSAGE_SELF covers the whole run.
        "peak_rss_mb": round(getrusage(RUSAGE_SELF).ru_maxrss / 1024, 1),
        "notes": notes,
    }


@dataclass(frozen=True, slots=True)
class _Credentials:
    api_key: str
    api_secret: str = field(repr=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dlt_peer", description=__doc__)
    parser.add_argument("--url", required=True, help="base URL of the exchange (the simulator)")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--api-secret", required=True)
    parser.add_argument("--resource", choices=RESOURCES, required=True)
    parser.add_argument("--destination", choices=DESTINATIONS, default="parquet")
    parser.add_argument("--out", type=Path, required=True, help="an empty directory")
    parser.add_argument(
        "--max-rows", type=int, help="stop paging after this many rows (whole pages of 100)"
    )
    parser.add_argument("--market", help="funding_history of one market only")
    parser.add_argument("--expected", type=int, help="complete row count, if known")
    parser.add_argument(
        "--bucket-url",
        help="parquet: write to this s3://bucket/prefix (credentials and endpoint: the AWS "
        "variables) instead of --out",
    )
    parser.add_argument("--cpu", type=int, help="pin this process to one CPU")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    # Only the JSON line goes to stdout: anything dlt or its libraries print goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        result = run(
            args.url,
            _Credentials(args.api_key, args.api_secret),
            args.resource,
            args.destination,
            args.out,
            args.max_rows,
            market=args.market,
            expected=args.expected,
            bucket_url=args.bucket_url,
        )
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
