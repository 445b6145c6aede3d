"""Load: table schemas made from the histories' declarations, exact normalization, atomic Parquet
partitions on local disk or an object store, the DuckDB catalog, the report.

For analysts in Python: ``warehouse.query("SELECT ...", root="data")`` returns a pandas DataFrame,
exact. Everything else works on a `Warehouse`, opened once from its root. Whatever the warehouse
cannot do is a `WarehouseError` (its tree is in `warehouse.errors`).
"""

from warehouse.catalog import query
from warehouse.errors import WarehouseError
from warehouse.root import RootError, Warehouse, WarehouseConfig

__all__ = ["RootError", "Warehouse", "WarehouseConfig", "WarehouseError", "query"]
