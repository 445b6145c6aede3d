-- Each asset's main balance and trading balance on the latest snapshot of each, side by side.
WITH main AS (
    SELECT ticker, main_balance, snapshot_date
    FROM main_balances
    WHERE snapshot_date = (SELECT max(snapshot_date) FROM main_balances)
),
trading AS (
    SELECT ticker, available, frozen, snapshot_date
    FROM trading_balances
    WHERE snapshot_date = (SELECT max(snapshot_date) FROM trading_balances)
)
SELECT
    coalesce(main.ticker, trading.ticker) AS ticker,
    main.main_balance,
    trading.available AS trading_available,
    trading.frozen AS trading_frozen,
    main.snapshot_date AS main_snapshot_date,
    trading.snapshot_date AS trading_snapshot_date
FROM main
FULL OUTER JOIN trading ON main.ticker = trading.ticker
