"""The root of the warehouse's errors, so that a caller catches every one of them in one clause
(the command line ends with its message, one line, never a traceback)."""

from __future__ import annotations


class WarehouseError(Exception):
    """What the warehouse could not do, in one line naming what and where. Each error is defined
    in the module named beside it, the one whose work it is::

        WarehouseError
        │  opening and storing
        ├── RootError              root        a warehouse root that cannot be used
        ├── StoreError             store       the store, or the local disk, refused or did not
        │                                      answer (which file, and why)
        ├── LeaseError             locks       a writer's lease not taken in time, or lost
        │                                      while held
        ├── PreconditionFailed     locks       a conditional write refused (412): the lease's
        │                                      object changed; handled inside `locks`
        │  writing
        ├── InvalidPartitionValue  layout      a partition value that makes no safe path segment
        ├── SchemaMismatch         partitions  rows not of the shape the table declares
        ├── SourceMismatch         sources     an account's run against another exchange than
        │                                      the one its rows came from
        ├── FewerRowsRefused       monthly     the exchange lists fewer of a day's records than
        │                                      the warehouse holds
        ├── DayOrderError          monthly     records not newest month first, or outside the
        │                                      load's days
        ├── LoadAbandoned          monthly     the load ended before its finish: no partition
        │                                      more is written
        ├── WriterDied             writer      the writer process ended without saying why
        │  reading
        ├── CatalogError           catalog     a catalog that cannot answer
        ├── ReportError            report      a report that cannot be built as asked
        └── ExportError            exports     an export for a tax tool that cannot be made
                                               as asked (a format, an account, a year)

    A mistake of the caller's own code (an unknown table name, a load given no day) stays a
    `ValueError`: it is no condition of the warehouse.
    """
