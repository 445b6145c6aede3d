-- Per day, the value of every account's snapshot valued at that day's close (account_value): the team's value in the reference currency, the accounts counted, and the assets any of them holds that no price values that day.
SELECT
    value_date,
    count(*) AS accounts,
    sum(value) AS value,
    list_sort(list_distinct(flatten(list(unpriced_assets)))) AS unpriced_assets
FROM account_value
GROUP BY value_date
