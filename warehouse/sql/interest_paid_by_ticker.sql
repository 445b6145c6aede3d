-- Interest paid so far per interest currency, over all investments of the latest snapshot.
SELECT
    snapshot_date,
    plan_interest_ticker AS interest_ticker,
    count(*) AS investments,
    sum(interest_paid) AS interest_paid
FROM investments
WHERE snapshot_date = (SELECT max(snapshot_date) FROM investments)
GROUP BY snapshot_date, plan_interest_ticker
