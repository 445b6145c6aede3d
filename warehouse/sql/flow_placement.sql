-- Each flow of flow_records with the snapshot that closes its interval (closing_date; null: after the latest) and how it was placed (placed_by): by its time, or by what the balances show, its time being within the instant a snapshot may show (snapshot_windows). A record's flows move together (a fill's base, quote and fee). It moved at moved_at (exact), or within the second it is stamped with (stamped; settled: a deposit credited, or a withdrawal returned, at the first snapshot after its creation that does not list it pending), or on its snapshot day (interest). Those within a snapshot's window the balances show are the first of them by time: of every such cut (a stamped record taken at either end of its second), the one kept makes the holdings less the flows before it equal to a neighbouring snapshot's, as they are along snapshots between which no record is missing; where none does, no record within the window is before it.
WITH windows AS (SELECT * FROM snapshot_windows),
-- A record's flows, one unit: the earliest and the latest moment it may have moved.
units AS (
    SELECT
        account,
        source,
        record_id,
        timing,
        any_value(moved_at) AS first_at,
        any_value(moved_at) + CASE timing WHEN 'exact' THEN INTERVAL 0 SECOND
            ELSE INTERVAL 1 SECOND END AS last_at,
        any_value(day) AS day
    FROM flow_records
    GROUP BY account, source, record_id, timing
),
pending AS (SELECT DISTINCT account, snapshot_date, transaction_id FROM pending_flows),
-- The first snapshot the unit is certainly before: after its last moment (and, settled, not
-- listed pending there); interest, on its day.
certain AS (
    SELECT u.account, u.source, u.record_id, u.timing, w.n
    FROM units AS u
    ASOF JOIN windows AS w ON w.account = u.account AND w.seen_from >= u.last_at
    WHERE u.timing IN ('exact', 'stamped')
    UNION ALL
    SELECT u.account, u.source, u.record_id, u.timing, min(w.n)
    FROM units AS u
    JOIN windows AS w ON w.account = u.account AND w.seen_from >= u.last_at
    ANTI JOIN pending AS p
        ON p.account = u.account AND p.snapshot_date = w.snapshot_date
        AND p.transaction_id = u.record_id
    WHERE u.timing = 'settled'
    GROUP BY ALL
    UNION ALL
    SELECT u.account, u.source, u.record_id, u.timing, w.n
    FROM units AS u
    ASOF JOIN windows AS w ON w.account = u.account AND w.snapshot_date >= u.day
    WHERE u.timing = 'snapshot'
),
-- A unit that may have moved within a snapshot's window, ranked there by its earliest moment
-- and by its latest.
inside AS (
    SELECT
        u.account,
        u.source,
        u.record_id,
        u.timing,
        w.n,
        row_number() OVER (
            PARTITION BY u.account, w.n ORDER BY u.first_at, u.source, u.record_id, u.timing
        ) AS early,
        row_number() OVER (
            PARTITION BY u.account, w.n ORDER BY u.last_at, u.source, u.record_id, u.timing
        ) AS late
    FROM units AS u
    JOIN windows AS w
        ON w.account = u.account AND u.last_at > w.seen_from AND u.first_at < w.seen_until
    WHERE u.timing IN ('exact', 'stamped')
        OR (u.timing = 'settled' AND NOT EXISTS (
            SELECT 1 FROM pending AS p
            WHERE p.account = u.account AND p.snapshot_date = w.snapshot_date
                AND p.transaction_id = u.record_id
        ))
),
-- Each snapshot's cuts: the first k units inside it, in either order (k = 0: none).
cuts AS (
    SELECT account, n, 'early' AS by_end, 0 AS k FROM windows
    UNION ALL
    SELECT account, n, 'early', early FROM inside
    UNION ALL
    SELECT account, n, 'late', late FROM inside
),
tickers AS (
    SELECT DISTINCT account, ticker FROM holdings
    UNION
    SELECT DISTINCT account, ticker FROM flow_records
),
-- Per snapshot and asset: the holdings less every flow certainly before the snapshot.
levels AS (
    SELECT
        w.account,
        w.n,
        t.ticker,
        coalesce(any_value(h.holdings), 0) AS holdings,
        coalesce(sum(f.amount), 0) AS certain
    FROM windows AS w
    JOIN tickers AS t ON t.account = w.account
    LEFT JOIN holdings AS h
        ON h.account = w.account AND h.snapshot_date = w.snapshot_date AND h.ticker = t.ticker
    LEFT JOIN (
        certain AS c
        JOIN flow_records AS f
            ON f.account = c.account AND f.source = c.source AND f.record_id = c.record_id
            AND f.timing = c.timing
    ) ON c.account = w.account AND c.n = w.n AND f.ticker = t.ticker
    GROUP BY w.account, w.n, t.ticker
),
levels_so_far AS (
    SELECT
        account,
        n,
        ticker,
        holdings - sum(certain) OVER (PARTITION BY account, ticker ORDER BY n) AS level
    FROM levels
),
-- What each cut's units move, per asset.
cut_flows AS (
    SELECT c.account, c.n, c.by_end, c.k, f.ticker, sum(f.amount) AS amount
    FROM cuts AS c
    JOIN inside AS i
        ON i.account = c.account AND i.n = c.n
        AND CASE c.by_end WHEN 'early' THEN i.early ELSE i.late END <= c.k
    JOIN flow_records AS f
        ON f.account = i.account AND f.source = i.source AND f.record_id = i.record_id
        AND f.timing = i.timing
    GROUP BY ALL
),
cut_levels AS (
    SELECT c.account, c.n, c.by_end, c.k, l.ticker, l.level - coalesce(m.amount, 0) AS level
    FROM cuts AS c
    JOIN levels_so_far AS l ON l.account = c.account AND l.n = c.n
    LEFT JOIN cut_flows AS m
        ON m.account = c.account AND m.n = c.n AND m.by_end = c.by_end AND m.k = c.k
        AND m.ticker = l.ticker
),
-- Whether a cut's levels equal, on every asset, those of a cut of the snapshot before (back)
-- or after (ahead).
agreement AS (
    SELECT a.account, a.n, a.by_end, a.k, b.n AS other, b.by_end AS other_by, b.k AS other_k,
        bool_and(a.level = b.level) AS equal
    FROM cut_levels AS a
    JOIN cut_levels AS b
        ON b.account = a.account AND b.ticker = a.ticker AND b.n IN (a.n - 1, a.n + 1)
    GROUP BY ALL
),
scored AS (
    SELECT
        c.account,
        c.n,
        c.by_end,
        c.k,
        2 * CAST(coalesce(bool_or(g.equal AND g.other = c.n - 1), false) AS INTEGER)
            + CAST(coalesce(bool_or(g.equal AND g.other = c.n + 1), false) AS INTEGER) AS score
    FROM cuts AS c
    LEFT JOIN agreement AS g
        ON g.account = c.account AND g.n = c.n AND g.by_end = c.by_end AND g.k = c.k
    GROUP BY ALL
),
-- Each snapshot's cut: one that agrees both ways, else back, else ahead, else none.
chosen AS (
    SELECT account, n, by_end, k, score
    FROM scored
    QUALIFY row_number() OVER (PARTITION BY account, n ORDER BY score DESC, k, by_end) = 1
),
by_balances AS (
    SELECT i.account, i.source, i.record_id, i.timing, min(i.n) AS n
    FROM inside AS i
    JOIN chosen AS c
        ON c.account = i.account AND c.n = i.n
        AND CASE c.by_end WHEN 'early' THEN i.early ELSE i.late END <= c.k
    GROUP BY ALL
),
placed AS (
    SELECT
        u.account,
        u.source,
        u.record_id,
        u.timing,
        coalesce(b.n, c.n) AS n,
        CASE WHEN b.n IS NOT NULL THEN 'balances' WHEN c.n IS NOT NULL THEN 'time' END
            AS placed_by
    FROM units AS u
    LEFT JOIN certain AS c USING (account, source, record_id, timing)
    LEFT JOIN by_balances AS b USING (account, source, record_id, timing)
)
SELECT f.*, w.snapshot_date AS closing_date, p.placed_by
FROM flow_records AS f
JOIN placed AS p USING (account, source, record_id, timing)
LEFT JOIN windows AS w ON w.account = p.account AND w.n = p.n
