-- Per account and month (of its closing snapshot's value_date), where its value came from, in the reference currency: the opening value, net contributions (kinds {{CONTRIBUTION_KINDS}}, net of fees), funding, interest, realized P&L, fees, and the market effect, the remainder, summing exactly to the closing value; each flow flow_placement puts in the month at its day's close (flow_values). unpriced_assets: held or moved, and in no figure. monthly_return: Modified Dietz, gain (closing - opening - net contributions) over return_base (opening plus each contribution weighted by the share of the month after it), a double; null where the base is not positive. chained_return: (1 + r1)(1 + r2)... - 1.
WITH snapshots AS (
    SELECT
        account,
        snapshot_date AS closing_date,
        snapshot_at AS closing_at,
        value AS closing_value,
        strftime(value_date, '%Y-%m') AS month,
        lag(snapshot_date) OVER by_time AS opening_date,
        lag(snapshot_at) OVER by_time AS opening_at,
        lag(value) OVER by_time AS opening_value,
        list_distinct(unpriced_assets || lag(unpriced_assets) OVER by_time) AS unpriced
    FROM account_value
    WINDOW by_time AS (PARTITION BY account ORDER BY snapshot_date)
),
intervals AS (SELECT * FROM snapshots WHERE opening_date IS NOT NULL),
months AS (
    SELECT
        account,
        month,
        arg_min(opening_date, opening_at) AS opening_date,
        min(opening_at) AS opening_at,
        arg_min(opening_value, opening_at) AS opening_value,
        arg_max(closing_date, closing_at) AS closing_date,
        max(closing_at) AS closing_at,
        arg_max(closing_value, closing_at) AS closing_value,
        flatten(list(unpriced)) AS unpriced
    FROM intervals
    GROUP BY account, month
),
flows AS (
    SELECT
        i.account,
        i.month,
        f.kind,
        f.ticker,
        f.value - f.fee_value AS net_value,
        f.fee_value,
        f.value IS NULL AS unpriced,
        f.kind IN ({{CONTRIBUTION_KINDS}}) AS contribution,
        -- The share of the month after it (a record stamped in whole seconds may be a part
        -- of one past either snapshot).
        greatest(0, least(1, (epoch_us(m.closing_at) - epoch_us(f.moved_at))
            / (epoch_us(m.closing_at) - epoch_us(m.opening_at)))) AS weight
    FROM flow_values AS f
    JOIN intervals AS i ON i.account = f.account AND i.closing_date = f.closing_date
    JOIN months AS m ON m.account = i.account AND m.month = i.month
),
sums AS (
    SELECT
        account,
        month,
        coalesce(sum(net_value) FILTER (WHERE contribution), 0) AS net_contributions,
        coalesce(sum(net_value) FILTER (WHERE kind = 'funding'), 0) AS funding,
        coalesce(sum(net_value) FILTER (WHERE kind = 'interest'), 0) AS interest,
        coalesce(sum(net_value) FILTER (WHERE kind = 'realized_pnl'), 0) AS realized_pnl,
        coalesce(sum(fee_value), 0) AS fees,
        coalesce(sum(CAST(net_value AS DOUBLE) * weight) FILTER (WHERE contribution), 0)
            AS weighted_contributions,
        coalesce(list(ticker) FILTER (WHERE unpriced), []) AS unpriced
    FROM flows
    GROUP BY account, month
),
figures AS (
    SELECT
        m.account,
        m.month,
        m.opening_date,
        m.opening_at,
        m.opening_value,
        coalesce(s.net_contributions, 0) AS net_contributions,
        coalesce(s.funding, 0) AS funding,
        coalesce(s.interest, 0) AS interest,
        coalesce(s.realized_pnl, 0) AS realized_pnl,
        coalesce(s.fees, 0) AS fees,
        m.closing_value - m.opening_value - coalesce(s.net_contributions, 0)
            - coalesce(s.funding, 0) - coalesce(s.interest, 0) - coalesce(s.realized_pnl, 0)
            - coalesce(s.fees, 0) AS market_effect,
        m.closing_value,
        m.closing_date,
        m.closing_at,
        list_sort(list_distinct(m.unpriced || coalesce(s.unpriced, []))) AS unpriced_assets,
        m.closing_value - m.opening_value - coalesce(s.net_contributions, 0) AS gain,
        CAST(m.opening_value AS DOUBLE) + coalesce(s.weighted_contributions, 0) AS return_base
    FROM months AS m
    LEFT JOIN sums AS s USING (account, month)
)
SELECT
    *,
    CASE WHEN return_base > 0 THEN CAST(gain AS DOUBLE) / return_base END AS monthly_return,
    product(1 + monthly_return) OVER (PARTITION BY account ORDER BY month) - 1 AS chained_return
FROM figures
