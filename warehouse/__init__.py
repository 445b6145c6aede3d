"""Load: table schemas, exact normalization, atomic Parquet partitions, the DuckDB catalog."""
