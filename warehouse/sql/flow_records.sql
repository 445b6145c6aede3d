-- One row per movement of an account's holdings of an asset that its records tell, signed as it moves them (kind: deposits, withdrawals, withdrawals_returned, spot_trades, conversions, funding, realized_pnl, position_fees, transfers_in, transfers_out, interest), with the record (source, record_id) and its time; timing says how the statement places it between two snapshots: exact (a time to the microsecond, in (T1, T2]), stamped (whole seconds, after the stamp: T1 <= stamp < T2), settled (a deposit credited or a withdrawal returned, at the first snapshot after its creation that does not list it pending), snapshot (interest: the change of interest_paid since the investments snapshot before).
WITH spot AS (
    SELECT
        *,
        split_part(market, '_', 1) AS base,
        split_part(market, '_', 2) AS quote,
        CASE side WHEN 'buy' THEN 1 WHEN 'sell' THEN -1 END AS sign
    FROM trades
    WHERE NOT regexp_matches(market, {{PERP_MARKET}})
),
movements AS (
    SELECT *, CAST(method = {{DEPOSIT}} AS INTEGER) - CAST(method = {{WITHDRAWAL}} AS INTEGER) AS sign
    FROM deposits_withdrawals
),
-- A sub-account's name in the warehouse: its alias on the main account's latest list.
subaccount_names AS (
    SELECT account, subaccount_id, alias
    FROM subaccounts
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
),
transfers AS (
    SELECT t.*, CASE t.direction WHEN 'main_to_sub' THEN 1 WHEN 'sub_to_main' THEN -1 END AS to_sub
    FROM subaccount_transfers AS t
),
-- Interest paid so far per interest ticker on each investments snapshot (zero where a ticker
-- has none that day), and its change since the snapshot before.
investment_days AS (SELECT DISTINCT account, snapshot_date FROM investments),
interest_tickers AS (SELECT DISTINCT account, plan_interest_ticker AS ticker FROM investments),
interest_paid AS (
    SELECT d.account, d.snapshot_date, t.ticker, coalesce(sum(i.interest_paid), 0) AS paid
    FROM investment_days AS d
    JOIN interest_tickers AS t ON t.account = d.account
    LEFT JOIN investments AS i
        ON i.account = d.account AND i.snapshot_date = d.snapshot_date
        AND i.plan_interest_ticker = t.ticker
    GROUP BY d.account, d.snapshot_date, t.ticker
),
interest AS (
    SELECT
        account,
        ticker,
        snapshot_date,
        paid - lag(paid) OVER (PARTITION BY account, ticker ORDER BY snapshot_date) AS change
    FROM interest_paid
)
SELECT account, base AS ticker, 'spot_trades' AS kind, 'trades' AS source,
    CAST(trade_id AS VARCHAR) AS record_id, trade_time AS moved_at, trade_date AS day,
    'exact' AS timing, sign * amount AS amount
FROM spot
UNION ALL
SELECT account, quote, 'spot_trades', 'trades', CAST(trade_id AS VARCHAR), trade_time, trade_date,
    'exact', -sign * deal
FROM spot
UNION ALL
SELECT account, fee_asset, 'spot_trades', 'trades', CAST(trade_id AS VARCHAR), trade_time,
    trade_date, 'exact', -fee
FROM spot
UNION ALL
SELECT account, {{SETTLEMENT_TICKER}}, 'realized_pnl', 'position_events',
    position_id || ' ' || strftime(event_time AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'),
    event_time, event_date, 'exact', realized_pnl
FROM position_events
WHERE realized_pnl IS NOT NULL
UNION ALL
SELECT account, {{SETTLEMENT_TICKER}}, 'position_fees', 'position_events',
    position_id || ' ' || strftime(event_time AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'),
    event_time, event_date, 'exact', -trade_fee
FROM position_events
UNION ALL
SELECT account, {{SETTLEMENT_TICKER}}, 'funding', 'funding_history',
    market || ' ' || strftime(funding_time AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') || ' '
        || position_side,
    funding_time, funding_date, 'exact', funding_amount
FROM funding_history
UNION ALL
SELECT account, give_ticker, 'conversions', 'conversions', conversion_id, converted_at,
    converted_date, 'stamped', -give
FROM conversions
UNION ALL
SELECT account, receive_ticker, 'conversions', 'conversions', conversion_id, converted_at,
    converted_date, 'stamped', receive
FROM conversions
UNION ALL
SELECT account, ticker, 'deposits', 'deposits_withdrawals', transaction_id, created_at,
    created_date, 'settled', amount - fee
FROM movements
WHERE sign = 1 AND status IN ({{SUCCESSFUL}})
UNION ALL
SELECT account, ticker, 'withdrawals', 'deposits_withdrawals', transaction_id, created_at,
    created_date, 'stamped', -(amount + fee)
FROM movements
WHERE sign = -1
UNION ALL
SELECT account, ticker, 'withdrawals_returned', 'deposits_withdrawals', transaction_id,
    created_at, created_date, 'settled', amount + fee
FROM movements
WHERE sign = -1 AND status IN ({{WITHDRAWAL_CANCELED}})
UNION ALL
SELECT account, ticker, CASE to_sub WHEN 1 THEN 'transfers_out' WHEN -1 THEN 'transfers_in' END,
    'subaccount_transfers', transfer_id, created_at, created_date, 'stamped', -to_sub * amount
FROM transfers
UNION ALL
SELECT n.alias, t.ticker, CASE t.to_sub WHEN 1 THEN 'transfers_in' WHEN -1 THEN 'transfers_out' END,
    'subaccount_transfers', t.transfer_id, t.created_at, t.created_date, 'stamped',
    t.to_sub * t.amount
FROM transfers AS t
JOIN subaccount_names AS n ON n.account = t.account AND n.subaccount_id = t.subaccount_id
UNION ALL
SELECT account, ticker, 'interest', 'investments', strftime(snapshot_date, '%Y-%m-%d'),
    snapshot_date::TIMESTAMP AT TIME ZONE 'UTC', snapshot_date, 'snapshot', change
FROM interest
WHERE change IS NOT NULL
