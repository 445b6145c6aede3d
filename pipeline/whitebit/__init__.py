"""The WhiteBIT REST API v4 client: signed, paced, retried, paged. No Dagster, Parquet or DuckDB."""
