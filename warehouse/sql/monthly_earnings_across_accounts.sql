-- Per month, the team's earnings: monthly_earnings summed over every account (a transfer between two of them is a contribution of each, and nets to zero here), the accounts counted, and the team's return, the accounts' gains over their return bases (Modified Dietz of the whole), chained over the months.
WITH months AS (
    SELECT
        month,
        count(*) AS accounts,
        sum(opening_value) AS opening_value,
        sum(net_contributions) AS net_contributions,
        sum(funding) AS funding,
        sum(interest) AS interest,
        sum(realized_pnl) AS realized_pnl,
        sum(fees) AS fees,
        sum(market_effect) AS market_effect,
        sum(closing_value) AS closing_value,
        list_sort(list_distinct(flatten(list(unpriced_assets)))) AS unpriced_assets,
        sum(gain) AS gain,
        sum(return_base) AS return_base
    FROM monthly_earnings
    GROUP BY month
)
SELECT
    *,
    CASE WHEN return_base > 0 THEN CAST(gain AS DOUBLE) / return_base END AS monthly_return,
    product(1 + monthly_return) OVER (ORDER BY month) - 1 AS chained_return
FROM months
