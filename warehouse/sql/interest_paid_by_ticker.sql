-- Interest paid so far per account and interest currency, over all investments of each account's latest snapshot.
SELECT
    account,
    snapshot_date,
    plan_interest_ticker AS interest_ticker,
    count(*) AS investments,
    sum(interest_paid) AS interest_paid
FROM (
    SELECT *
    FROM investments
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
)
GROUP BY account, snapshot_date, plan_interest_ticker
