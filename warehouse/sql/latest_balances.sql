-- Each account's main balance and trading balance per asset on its latest snapshot of each, side by side.
WITH main AS (
    SELECT account, ticker, main_balance, snapshot_date
    FROM main_balances
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
),
trading AS (
    SELECT account, ticker, available, frozen, snapshot_date
    FROM trading_balances
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
)
SELECT
    coalesce(main.account, trading.account) AS account,
    coalesce(main.ticker, trading.ticker) AS ticker,
    main.main_balance,
    trading.available AS trading_available,
    trading.frozen AS trading_frozen,
    main.snapshot_date AS main_snapshot_date,
    trading.snapshot_date AS trading_snapshot_date
FROM main
FULL OUTER JOIN trading ON main.account = trading.account AND main.ticker = trading.ticker
