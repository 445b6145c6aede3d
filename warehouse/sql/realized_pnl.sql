-- Per account, collateral market and UTC day, in the settlement ticker: the position events, their realized P&L and trade fees, the funding of that market and day (funding_history), and the net (realized P&L - fees + funding).
WITH events AS (
    SELECT
        account,
        market,
        event_date AS day,
        count(*) AS position_events,
        coalesce(sum(realized_pnl), 0) AS realized_pnl,
        sum(trade_fee) AS trade_fees
    FROM position_events
    GROUP BY account, market, event_date
),
funding AS (
    SELECT
        account,
        market,
        funding_date AS day,
        count(*) AS funding_payments,
        sum(funding_amount) AS funding
    FROM funding_history
    GROUP BY account, market, funding_date
)
SELECT
    account,
    market,
    day,
    {{SETTLEMENT_TICKER}} AS ticker,
    coalesce(events.position_events, 0) AS position_events,
    coalesce(events.realized_pnl, 0) AS realized_pnl,
    coalesce(events.trade_fees, 0) AS trade_fees,
    coalesce(funding.funding_payments, 0) AS funding_payments,
    coalesce(funding.funding, 0) AS funding,
    coalesce(events.realized_pnl, 0) - coalesce(events.trade_fees, 0)
        + coalesce(funding.funding, 0) AS net
FROM events
FULL OUTER JOIN funding USING (account, market, day)
