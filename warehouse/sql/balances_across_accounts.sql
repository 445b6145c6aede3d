-- Each asset's balances summed across accounts, each account on its latest snapshot: main, trading available and frozen, and how many accounts hold it.
SELECT
    ticker,
    sum(main_balance) AS main_balance,
    sum(trading_available) AS trading_available,
    sum(trading_frozen) AS trading_frozen,
    count(DISTINCT account) AS accounts
FROM latest_balances
GROUP BY ticker
