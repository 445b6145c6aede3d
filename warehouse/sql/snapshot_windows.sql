-- Each account's snapshots in order (n, from 1), each with its time (snapshot_at) and the bounds of the instant its balances show, seen_from <= instant < seen_until (holdings).
SELECT
    account,
    snapshot_date,
    row_number() OVER (PARTITION BY account ORDER BY snapshot_date) AS n,
    snapshot_at,
    seen_from,
    seen_until
FROM (SELECT DISTINCT account, snapshot_date, snapshot_at, seen_from, seen_until FROM holdings)
