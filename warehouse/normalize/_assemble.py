"""Assembly: converted columns -> a `Batch`: the valid rows, duplicate keys resolved, and the
``_rejects`` rows (raw JSON and reason) of everything else, so that ``received == normalized +
rejected + duplicates``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import schemas
from warehouse.normalize._convert import Converted
from warehouse.normalize._intake import Intake, canonical_json, json_text
from warehouse.normalize._reasons import join_reasons
from warehouse.schemas import TableSchema

#: A rejected record: its input position, the partition it is rejected into, the reason.
Rejected = tuple[int, str, str]


@dataclass(frozen=True, slots=True)
class Seen:
    """When a snapshot was seen, beside its ``observed_at`` (`schemas.SEEN_COLUMNS`): the
    exchange's times bounding the instant it shows, this machine's times of asking and of the
    last answer, and whether the snapshots taken with it agreed on one instant (None: asked
    once)."""

    observed_from: datetime | None = None
    observed_until: datetime | None = None
    asked_at: datetime | None = None
    answered_at: datetime | None = None
    consistent: bool | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """One table's share of a normalization: typed rows, rejected records and counts."""

    table: str
    #: Rows in the shape of ``schemas.TABLES[table].arrow_schema``.
    rows: pa.Table
    #: Rejected records in the shape of ``schemas.TABLES["_rejects"].arrow_schema``.
    rejects: pa.Table
    #: Records received (for ``fixed_plans``: plan objects carried by the investments).
    received: int
    #: Exact copies of a record already in the batch, kept once.
    duplicates: int
    #: Partitions this batch is the whole truth for, even where it holds no row (the snapshot
    #: day; the funding day the caller named). Writing the batch replaces each of them.
    covers: tuple[date, ...] = ()

    @property
    def normalized(self) -> int:
        return int(self.rows.num_rows)

    @property
    def rejected(self) -> int:
        return int(self.rejects.num_rows)

    @property
    def schema(self) -> TableSchema:
        return schemas.TABLES[self.table]


def assemble(
    schema: TableSchema,
    intake: Intake,
    columns: Mapping[str, Converted],
    *,
    extracted_at: datetime,
    home_partition: date,
    reject_partition: pa.Array | None = None,
    snapshot_date: date | None = None,
    observed_at: datetime | None = None,
    seen: Seen | None = None,
) -> Batch:
    """The batch of ``columns`` (one per column of the table but ``extracted_at``, and a
    snapshot's ``snapshot_date`` and ``observed_at``, which are constants). A record is rejected
    into its ``reject_partition`` (default: ``home_partition``) with every failing field's
    reason."""
    length = len(intake)
    constants: dict[str, pa.Array] = {
        "extracted_at": pa.repeat(pa.scalar(extracted_at, schemas.UTC_TIME), length)
    }
    if snapshot_date is not None:
        constants["snapshot_date"] = pa.repeat(pa.scalar(snapshot_date, schemas.DAY), length)
        constants["observed_at"] = pa.repeat(pa.scalar(observed_at, schemas.UTC_TIME), length)
        for name in schemas.SEEN_COLUMNS:
            kind = schema.column(name).type
            value = getattr(seen or Seen(), name)
            constants[name] = pa.repeat(pa.scalar(value, kind), length)
    arrays = {name: converted.values for name, converted in columns.items()} | constants
    unknown = set(arrays) ^ {c.name for c in schema.columns}
    if unknown:
        raise AssertionError(f"{schema.name}: columns built do not match the schema: {unknown}")

    field_reasons = [c.reasons for c in columns.values()]
    invalid = pa.repeat(pa.scalar(False), length)
    for reason in field_reasons:
        if reason.null_count < length:
            invalid = pc.or_(invalid, pc.is_valid(reason))
    loose = pa.schema([pa.field(c.name, c.type) for c in schema.columns])
    candidates = pa.Table.from_arrays([arrays[c.name] for c in schema.columns], schema=loose)
    positions = pa.array(intake.indices, pa.int64())

    rejected: list[Rejected] = [
        (position, home_partition.isoformat(), reason) for position, reason in intake.early_rejects
    ]
    rows, row_positions = candidates, positions
    if pc.any(invalid).as_py():
        partitions = reject_partition
        if partitions is None:
            partitions = pa.repeat(pa.scalar(home_partition.isoformat()), length)
        rejected += zip(
            positions.filter(invalid).to_pylist(),
            partitions.filter(invalid).to_pylist(),
            join_reasons([r.filter(invalid) for r in field_reasons]).to_pylist(),
            strict=True,
        )
        valid = pc.invert(invalid)
        rows, row_positions = candidates.filter(valid), positions.filter(valid)

    keep, duplicates, conflicts = _resolve_duplicate_keys(schema, rows, row_positions, intake)
    if keep is not None:
        rows = rows.filter(keep)
    rejected += conflicts
    return Batch(
        table=schema.name,
        rows=rows.cast(schema.arrow_schema),
        rejects=_rejects_table(schema.name, rejected, intake, extracted_at),
        received=intake.received,
        duplicates=intake.duplicates + duplicates,
        covers=(home_partition,),
    )


def _resolve_duplicate_keys(
    schema: TableSchema, rows: pa.Table, positions: pa.Array, intake: Intake
) -> tuple[pa.Array | None, int, list[Rejected]]:
    """Rows to keep, identical copies dropped, and conflicting records to reject."""
    key = list(schema.key)
    if rows.num_rows < 2:
        return None, 0, []
    if not has_equal_keys(rows.select(key)):
        return None, 0, []
    keyed = rows.select(key).append_column("_position", positions)
    partition_column = schema.partition_column
    aggregates = [("_position", "list")]
    if partition_column not in key:
        keyed = keyed.append_column(partition_column, rows[partition_column])
        aggregates.append((partition_column, "min"))
    groups = keyed.group_by(key).aggregate(aggregates)
    groups = groups.filter(pc.greater(pc.list_value_length(groups["_position_list"]), 1))
    dropped: set[int] = set()
    duplicates = 0
    conflicts: list[Rejected] = []
    for group in groups.to_pylist():
        members: list[int] = sorted(group["_position_list"])
        contents = {canonical_json(intake.raw[m]) for m in members}
        if len(contents) == 1:
            dropped.update(members[1:])
            duplicates += len(members) - 1
            continue
        described = ", ".join(f"{k}={group[k]}" for k in key if k != partition_column)
        reason = f"duplicate key ({described}): {len(members)} records in this batch differ"
        day = group.get(partition_column, group.get(f"{partition_column}_min"))
        partition = day.isoformat() if isinstance(day, date) else str(day)
        dropped.update(members)
        conflicts += [(m, partition, reason) for m in members]
    keep = pc.invert(pc.is_in(positions, value_set=pa.array(sorted(dropped), pa.int64())))
    return keep, duplicates, conflicts


def has_equal_keys(keys: pa.Table) -> bool:
    """Whether two rows share a key: sort, then compare neighbours (no hash table to build)."""
    ordered = keys.take(
        pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in keys.column_names])
    )
    return has_equal_neighbours(ordered)


def has_equal_neighbours(ordered: pa.Table) -> bool:
    """Whether two neighbouring rows are equal: on rows sorted by all their columns, whether
    two rows are."""
    length = ordered.num_rows
    same: pa.ChunkedArray | None = None
    for name in ordered.column_names:
        column = ordered[name]
        equal = pc.equal(column.slice(0, length - 1), column.slice(1))
        same = equal if same is None else pc.and_(same, equal)
    return bool(same is not None and pc.any(same).as_py())


def _rejects_table(
    table: str, rejected: list[Rejected], intake: Intake, extracted_at: datetime
) -> pa.Table:
    rejected.sort()
    return pa.Table.from_pydict(
        {
            "table": [table] * len(rejected),
            "partition": [partition for _, partition, _ in rejected],
            "record_index": [position for position, _, _ in rejected],
            "raw_json": [raw_json(intake.raw[position]) for position, _, _ in rejected],
            "reason": [intake.prefix(p) + reason for p, _, reason in rejected],
            "extracted_at": [extracted_at] * len(rejected),
        },
        schema=schemas.REJECTS_TABLE.arrow_schema,
    )


def raw_json(value: object) -> str:
    """The record as JSON text; the stdlib keeps NaN and big integers as they were parsed, and
    exact numbers stay exact."""
    text = json_text(value)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: kept, as its JSON escape
        text = json_text(value, ascii_only=True)
    return text
