-- Per account, asset and interval between consecutive snapshot days: the holdings at the opening snapshot, each kind of flow its records place in the interval (flow_records), the holdings at the closing snapshot, and the residual, closing - opening - flows: zero when the records account for every movement.
WITH snapshots AS (
    SELECT DISTINCT account, snapshot_date, snapshot_at FROM holdings
),
intervals AS (
    SELECT
        account,
        lag(snapshot_date) OVER by_day AS opening_date,
        snapshot_date AS closing_date,
        lag(snapshot_at) OVER by_day AS opening_at,
        snapshot_at AS closing_at
    FROM snapshots
    WINDOW by_day AS (PARTITION BY account ORDER BY snapshot_date)
),
-- Each flow at the snapshot that closes its interval, by its timing.
exact AS (
    SELECT f.account, f.ticker, f.kind, f.amount, s.snapshot_date AS closing_date
    FROM flow_records AS f
    ASOF JOIN snapshots AS s ON s.account = f.account AND s.snapshot_at >= f.moved_at
    WHERE f.timing = 'exact'
),
stamped AS (
    SELECT f.account, f.ticker, f.kind, f.amount, s.snapshot_date AS closing_date
    FROM flow_records AS f
    ASOF JOIN snapshots AS s ON s.account = f.account AND s.snapshot_at > f.moved_at
    WHERE f.timing = 'stamped'
),
on_snapshot AS (
    SELECT f.account, f.ticker, f.kind, f.amount, s.snapshot_date AS closing_date
    FROM flow_records AS f
    ASOF JOIN snapshots AS s ON s.account = f.account AND s.snapshot_date >= f.day
    WHERE f.timing = 'snapshot'
),
-- Credited (or returned) by the first snapshot after its creation that does not list it
-- pending: its settle time is not in the history.
settled AS (
    SELECT f.account, f.ticker, f.kind, f.record_id, any_value(f.amount) AS amount,
        min(s.snapshot_date) AS closing_date
    FROM flow_records AS f
    JOIN snapshots AS s ON s.account = f.account AND s.snapshot_at > f.moved_at
    LEFT JOIN pending_flows AS p
        ON p.account = f.account AND p.snapshot_date = s.snapshot_date
        AND p.transaction_id = f.record_id
    WHERE f.timing = 'settled' AND p.transaction_id IS NULL
    GROUP BY f.account, f.ticker, f.kind, f.record_id
),
placed AS (
    SELECT account, ticker, closing_date,
        {{FLOW_SUMS}}
        coalesce(sum(amount), 0) AS flows
    FROM (
        SELECT account, ticker, kind, amount, closing_date FROM exact
        UNION ALL SELECT account, ticker, kind, amount, closing_date FROM stamped
        UNION ALL SELECT account, ticker, kind, amount, closing_date FROM on_snapshot
        UNION ALL SELECT account, ticker, kind, amount, closing_date FROM settled
    )
    GROUP BY account, ticker, closing_date
),
lines AS (
    SELECT i.account, h.ticker, i.closing_date
    FROM intervals AS i
    JOIN holdings AS h
        ON h.account = i.account AND h.snapshot_date IN (i.opening_date, i.closing_date)
    WHERE i.opening_date IS NOT NULL
    UNION
    SELECT p.account, p.ticker, p.closing_date
    FROM placed AS p
    JOIN intervals AS i
        ON i.account = p.account AND i.closing_date = p.closing_date
    WHERE i.opening_date IS NOT NULL
)
SELECT
    lines.account,
    lines.ticker,
    i.opening_date,
    i.closing_date,
    i.opening_at,
    i.closing_at,
    coalesce(opening.holdings, 0) AS opening,
    {{FLOW_COLUMNS}}
    coalesce(p.flows, 0) AS flows,
    coalesce(closing.holdings, 0) AS closing,
    coalesce(closing.holdings, 0) - coalesce(opening.holdings, 0) - coalesce(p.flows, 0)
        AS residual
FROM lines
JOIN intervals AS i ON i.account = lines.account AND i.closing_date = lines.closing_date
LEFT JOIN holdings AS opening
    ON opening.account = lines.account AND opening.snapshot_date = i.opening_date
    AND opening.ticker = lines.ticker
LEFT JOIN holdings AS closing
    ON closing.account = lines.account AND closing.snapshot_date = i.closing_date
    AND closing.ticker = lines.ticker
LEFT JOIN placed AS p
    ON p.account = lines.account AND p.closing_date = lines.closing_date
    AND p.ticker = lines.ticker
