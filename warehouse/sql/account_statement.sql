-- Per account, asset and interval between consecutive snapshot days: the holdings at the opening snapshot, each kind of flow its records place in the interval (flow_placement), the holdings at the closing snapshot, and the residual, closing - opening - flows: zero when the records account for every movement.
WITH intervals AS (
    SELECT
        account,
        lag(snapshot_date) OVER by_day AS opening_date,
        snapshot_date AS closing_date,
        lag(snapshot_at) OVER by_day AS opening_at,
        snapshot_at AS closing_at
    FROM snapshot_windows
    WINDOW by_day AS (PARTITION BY account ORDER BY snapshot_date)
),
placed AS (
    SELECT account, ticker, closing_date,
        {{FLOW_SUMS}}
        coalesce(sum(amount), 0) AS flows
    FROM flow_placement
    WHERE closing_date IS NOT NULL
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
