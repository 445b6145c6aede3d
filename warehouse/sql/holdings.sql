-- What each account holds of each asset at each snapshot: its main balance, trading balance (available and frozen), collateral balance and the principal of its active investments, and their sum (holdings); snapshot_at is the snapshot's time, the exchange's time of the main balance's answer (else when it was extracted), and the balances show the account at an instant seen_from <= instant < seen_until by the exchange's clock (the exchange's time before they were asked for, and the end of the second of their last answer; snapshot_at both, where the snapshot did not say).
WITH snapshots AS (
    SELECT
        account,
        snapshot_date,
        coalesce(max(observed_at), max(extracted_at)) AS snapshot_at,
        coalesce(min(observed_from), snapshot_at) AS seen_from,
        coalesce(max(observed_until) + INTERVAL 1 SECOND, snapshot_at) AS seen_until
    FROM main_balances
    GROUP BY account, snapshot_date
),
parts AS (
    SELECT account, snapshot_date, ticker, main_balance AS main, 0 AS trading,
        0 AS collateral, 0 AS invested
    FROM main_balances
    UNION ALL
    SELECT account, snapshot_date, ticker, 0, available + frozen, 0, 0
    FROM trading_balances
    UNION ALL
    SELECT account, snapshot_date, ticker, 0, 0, balance, 0
    FROM collateral_balances
    UNION ALL
    SELECT account, snapshot_date, plan_ticker, 0, 0, 0, amount
    FROM investments
    WHERE status = {{INVESTMENT_ACTIVE}}
)
SELECT
    parts.account,
    parts.snapshot_date,
    snapshots.snapshot_at,
    snapshots.seen_from,
    snapshots.seen_until,
    parts.ticker,
    sum(parts.main) AS main_balance,
    sum(parts.trading) AS trading_balance,
    sum(parts.collateral) AS collateral_balance,
    sum(parts.invested) AS invested,
    sum(parts.main) + sum(parts.trading) + sum(parts.collateral) + sum(parts.invested) AS holdings
FROM parts
JOIN snapshots USING (account, snapshot_date)
GROUP BY ALL
