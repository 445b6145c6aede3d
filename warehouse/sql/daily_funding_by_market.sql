-- Funding per account, UTC day and market: payments, total funding amount, and the range of rates.
SELECT
    account,
    funding_date,
    market,
    count(*) AS payments,
    sum(funding_amount) AS funding_amount,
    min(funding_rate) AS min_funding_rate,
    max(funding_rate) AS max_funding_rate
FROM funding_history
GROUP BY account, funding_date, market
