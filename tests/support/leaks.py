"""The secrets a test session hands out, and a look for them wherever a secret must never land.

Recorded (`Ledger.watch`, for the whole session): every secret of every simulator key made in
this process (each `KeyStore`, each reset), the demo secret of every simulator spawned as a
process, and every secret a test gives the client (`Credentials`). A simulator in another process
(spawned, or embedded in a CLI run or a Dagster code server) derives its secrets from its seed,
so every secret of the default seed and of each seed seen, after a few resets too, is included.
Placeholders shorter than `MIN_SECRET_CHARS` ("x", "wrong") are words, not secrets, and are left
out.

`Ledger.save` writes a ledger to a file and `Ledger.take_in` adds a saved one to another: a session
whose tests run in several processes (pytest-xdist workers) is scanned by a later session that
takes in each worker's ledger and reads the files under each worker's base temp directory.

`Ledger.look` finds them in text or bytes. `files_holding` looks in every file under a directory:
raw bytes (logs, SQLite, DuckDB, anything), Parquet decoded (compression would hide a secret from
a byte search), and DuckDB catalogs opened (view definitions and comments).
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline import simulator
from pipeline.simulator import SpawnedSimulator
from pipeline.whitebit import Credentials

MIN_SECRET_CHARS: Final = 12
#: Resets of a key whose secrets are derived (a reset gives a key its next derived secret).
RESETS: Final = 4
#: Sub-accounts of the most the tests ask a simulator for.
SUBACCOUNTS: Final = 4
#: A simulator's secrets are 40 lowercase hex digits: found by scanning hex runs, not one by one.
_HEX_SECRET = re.compile(r"[0-9a-f]{40}")
_HEX_RUN = re.compile(rb"[0-9a-f]{40,}")


def seed_secrets(seed: int, resets: int = RESETS) -> set[str]:
    """Every secret a simulator of this seed gives its keys (in either region, with as many
    sub-accounts as the tests ask for), now and after ``resets`` resets."""
    found = set()
    for region in simulator.REGIONS:
        keys = simulator.KeyStore(seed, subaccounts=SUBACCOUNTS, region=region)
        for role in keys.roles:
            key = keys[role]
            for _ in range(resets + 1):
                found.add(key.secret.decode())
                keys.reset(key)
    return found


def _held(content: str | bytes, secrets: frozenset[str], others: tuple[bytes, ...]) -> list[str]:
    """The ``secrets`` that ``content`` holds: a hex one found among the content's hex runs, any
    other (``others``, as bytes) looked for one by one."""
    data = content.encode("utf-8", "replace") if isinstance(content, str) else content
    found: set[str] = set()
    for run in _HEX_RUN.findall(data):
        text = run.decode()
        found.update(text[i : i + 40] for i in range(len(text) - 39))
    found &= secrets
    found.update(s.decode() for s in others if s in data)
    return sorted(found)


class Ledger:
    """Secrets handed out, and where they were seen."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._recorded: set[str] = set()
        self._seeds: set[int] = {simulator.DEFAULT_SEED}
        self._derived: dict[int, set[str]] = {}
        self._all: frozenset[str] | None = None
        self._other: tuple[bytes, ...] = ()
        #: Where a secret was seen: ("where", the secret shortened to its first characters).
        self.sightings: list[tuple[str, str]] = []

    def add(self, secret: str) -> None:
        if len(secret) >= MIN_SECRET_CHARS and secret not in self._recorded:
            with self._lock:
                self._recorded.add(secret)
                self._all = None

    def add_seed(self, seed: int) -> None:
        if seed not in self._seeds:
            with self._lock:
                self._seeds.add(seed)
                self._all = None

    def secrets(self) -> frozenset[str]:
        return self._sorted()[0]

    def _sorted(self) -> tuple[frozenset[str], tuple[bytes, ...]]:
        """Every secret, and those that are not hex (looked for one by one), as bytes."""
        with self._lock:
            if self._all is None:
                for seed in self._seeds - set(self._derived):
                    self._derived[seed] = set()  # deriving makes key stores, which add_seed
                    self._derived[seed] = seed_secrets(seed)
                self._all = frozenset(self._recorded.union(*self._derived.values()))
                self._other = tuple(s.encode() for s in self._all if not _HEX_SECRET.fullmatch(s))
            return self._all, self._other

    def look(self, where: str, content: str | bytes) -> list[str]:
        """The secrets ``content`` holds (each noted as a sighting at ``where``)."""
        found = _held(content, *self._sorted())
        self.saw([(where, secret) for secret in found])
        return found

    def saw(self, sightings: list[tuple[str, str]]) -> None:
        """Note these secrets seen (where, the secret)."""
        with self._lock:
            self.sightings += [(where, secret[:4] + "…") for where, secret in sightings]

    def save(self, path: Path, basetemp: Path, *, finished: bool) -> None:
        """Write the secrets recorded, the seeds seen and the sightings to ``path`` (replaced
        whole, never seen half written), with the base temp directory of the session they come
        from and whether that session has ``finished`` (written again at its end)."""
        with self._lock:
            state = {
                "basetemp": str(basetemp),
                "finished": finished,
                "recorded": sorted(self._recorded),
                "seeds": sorted(self._seeds),
                "sightings": self.sightings,
            }
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(json.dumps(state), encoding="utf-8")
        os.replace(partial, path)

    def take_in(self, path: Path) -> tuple[Path, bool]:
        """Add a saved ledger's secrets, seeds and sightings to this one: its session's base
        temp directory, and whether that session had finished."""
        state = json.loads(path.read_text(encoding="utf-8"))
        for secret in state["recorded"]:
            self.add(secret)
        for seed in state["seeds"]:
            self.add_seed(seed)
        with self._lock:
            self.sightings += [(where, secret) for where, secret in state["sightings"]]
        return Path(state["basetemp"]), bool(state["finished"])

    def watch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Record every secret handed out from now on (see the module's docstring)."""
        ledger = self

        def wrap(cls: Any, name: str, after: Any) -> None:
            original = getattr(cls, name)

            def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
                result = original(self, *args, **kwargs)
                after(self)
                return result

            monkeypatch.setattr(cls, name, wrapped)

        def key_store(keys: simulator.KeyStore) -> None:
            ledger.add_seed(keys._seed)
            for role in keys.roles:
                ledger.add(keys[role].secret.decode())

        wrap(simulator.KeyStore, "__init__", key_store)
        wrap(simulator.KeyStore, "reset", key_store)
        wrap(
            SpawnedSimulator,
            "__init__",
            lambda s: [ledger.add(c.api_secret) for c in (s.credentials, *s.subaccounts.values())],
        )
        wrap(Credentials, "__init__", lambda c: ledger.add(c.api_secret))

    def log_handler(self) -> logging.Handler:
        """A handler noting every log record that holds a secret (its text, its exception)."""
        ledger = self

        class Watch(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    text = record.getMessage()
                except Exception:  # a record that cannot format: its raw parts, then
                    text = f"{record.msg} {record.args}"
                if record.exc_info and record.exc_info[1] is not None:
                    text += f"\n{record.exc_info[1]!r}"
                ledger.look(f"log record of {record.name}", text)

        return Watch(logging.NOTSET)


def _parquet_strings(path: Path) -> str:
    """The text values of a Parquet file (its string columns, list items included)."""
    table = pq.read_table(path)
    texts: list[str] = []
    for column in table.columns:
        values = column.combine_chunks()
        while pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            values = pc.list_flatten(values)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            texts += [v for v in pc.unique(values).to_pylist() if v is not None]
    return "\n".join(texts)


def _catalog_text(path: Path) -> str:
    """What a DuckDB file defines: view SQL and comments, and the text of any table."""
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "SELECT sql, comment::VARCHAR FROM duckdb_views() WHERE NOT internal UNION ALL "
            "SELECT comment, NULL FROM duckdb_columns() WHERE comment IS NOT NULL UNION ALL "
            "SELECT sql, comment::VARCHAR FROM duckdb_tables()"
        ).fetchall()
        tables = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        for (table,) in tables:
            rows += con.execute(f'SELECT * FROM "{table}"').fetchall()  # noqa: S608
    return "\n".join(str(row) for row in rows)


def files_holding(ledger: Ledger, directory: Path) -> Iterator[tuple[Path, str]]:
    """Every file under ``directory``, each with how it was read, noting any secret in it. The
    files are read on two processes: a whole session's files take most of a minute on one."""
    paths = [p for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink()]
    read = functools.partial(_read, secrets=ledger._sorted())
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        for path, (kind, sightings) in zip(paths, pool.map(read, paths, chunksize=32), strict=True):
            ledger.saw(sightings)
            yield path, kind


def _read(
    path: Path, secrets: tuple[frozenset[str], tuple[bytes, ...]]
) -> tuple[str, list[tuple[str, str]]]:
    """How a file was read, and the secrets seen in it (where, the secret): its name, its bytes,
    and a Parquet file's values or a DuckDB catalog's text."""
    seen = [(f"file name {path}", s) for s in _held(str(path), *secrets)]
    seen += [(f"file {path}", s) for s in _held(path.read_bytes(), *secrets)]
    if path.suffix == ".parquet":
        seen += [(f"Parquet values of {path}", s) for s in _held(_parquet_strings(path), *secrets)]
        return "parquet", seen
    if path.suffix == ".duckdb":
        seen += [(f"DuckDB catalog {path}", s) for s in _held(_catalog_text(path), *secrets)]
        return "duckdb", seen
    return "bytes", seen


#: The session's secrets and where they were seen (log records, reports).
LEDGER = Ledger()
