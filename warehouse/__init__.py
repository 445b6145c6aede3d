"""Load: table schemas, exact normalization, atomic Parquet partitions, the DuckDB catalog.

For analysts in Python: ``warehouse.query("SELECT ...")`` returns a pandas DataFrame, exact.
"""

from warehouse.catalog import query

__all__ = ["query"]
