"""Load: table schemas made from the histories' declarations, exact normalization, atomic Parquet
partitions on local disk or an object store, the DuckDB catalog, the report.

For analysts in Python: ``warehouse.query("SELECT ...", root="data")`` returns a pandas DataFrame,
exact. Everything else works on a `Warehouse`, opened once from its root.
"""

from warehouse.catalog import query
from warehouse.root import RootError, Warehouse, WarehouseConfig

__all__ = ["RootError", "Warehouse", "WarehouseConfig", "query"]
