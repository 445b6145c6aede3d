-- Each closed order beside the sums of its fills the warehouse holds (amount, deal, fee, count) and whether they equal its deal_stock, deal_money and deal_fee (its fills' fees in its fee asset); fills_held: every fill of it is in the warehouse (it was placed on or after the first day of the account's fills, and closed before they were last read).
WITH fills AS (
    SELECT
        account,
        order_id,
        count(*) AS fills,
        sum(amount) AS fills_amount,
        sum(deal) AS fills_deal,
        sum(fee) AS fills_fee,
        count(DISTINCT fee_asset) AS fee_assets,
        any_value(fee_asset) AS fills_fee_asset
    FROM trades
    GROUP BY account, order_id
),
reach AS (
    SELECT
        account,
        -- Days are read whole: every fill of the first day held is there.
        min(trade_date)::TIMESTAMP AT TIME ZONE 'UTC' AS held_from,
        max(extracted_at) AS read_at
    FROM trades
    GROUP BY account
),
compared AS (
    SELECT
        o.account,
        o.market,
        o.order_id,
        o.side,
        o.status,
        o.created_at,
        o.finished_at,
        o.fee_asset,
        o.deal_stock,
        coalesce(f.fills_amount, 0) AS fills_amount,
        o.deal_money,
        coalesce(f.fills_deal, 0) AS fills_deal,
        o.deal_fee,
        coalesce(f.fills_fee, 0) AS fills_fee,
        coalesce(f.fills, 0) AS fills,
        coalesce(o.created_at >= r.held_from AND o.finished_at <= r.read_at, false) AS fills_held,
        o.deal_stock = coalesce(f.fills_amount, 0) AS amount_matches,
        o.deal_money = coalesce(f.fills_deal, 0) AS deal_matches,
        o.deal_fee = coalesce(f.fills_fee, 0)
            AND coalesce(f.fee_assets = 1 AND f.fills_fee_asset = o.fee_asset, true) AS fee_matches
    FROM orders AS o
    LEFT JOIN fills AS f ON f.account = o.account AND f.order_id = o.order_id
    LEFT JOIN reach AS r ON r.account = o.account
)
SELECT *, amount_matches AND deal_matches AND fee_matches AS matches
FROM compared
