-- input
SELECT r.country, SUM(s.amount) AS total FROM s.sales s JOIN s.regions r ON s.region = r.region GROUP BY r.country ORDER BY total DESC LIMIT 2

-- capture
SELECT
  country,
  total,
  __ps_1
FROM (
  SELECT
    country,
    total,
    __ps_1
  FROM (
    SELECT
      country,
      SUM(amount) AS total,
      COLLECT_SET(__ps_1) AS __ps_1
    FROM (
      SELECT
        *
      FROM (
        SELECT
          region,
          amount,
          __fragment AS __ps_1
        FROM s.sales
      ) AS q2
      JOIN (
        SELECT
          region AS region_2,
          country
        FROM s.regions
      ) AS q3
        ON region = region_2
    ) AS q4
    GROUP BY
      country
  ) AS q5
) AS q1
ORDER BY
  q1.total DESC
LIMIT 2
-- set: __ps_1

-- use
SELECT
  country,
  total
FROM (
  SELECT
    country,
    total
  FROM (
    SELECT
      country,
      SUM(amount) AS total
    FROM (
      SELECT
        *
      FROM (
        SELECT
          region,
          amount
        FROM (
          SELECT
            *
          FROM (
            SELECT
              region,
              amount,
              id AS __sketch_id
            FROM s.sales
          ) AS q4
          WHERE
            (
              __sketch_id >= 100 AND __sketch_id < 300
            )
        ) AS q5
      ) AS q2
      JOIN (
        SELECT
          region AS region_2,
          country
        FROM s.regions
      ) AS q3
        ON region = region_2
    ) AS q6
    GROUP BY
      country
  ) AS q7
) AS q1
ORDER BY
  q1.total DESC
LIMIT 2
