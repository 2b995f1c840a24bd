-- input
SELECT country FROM s.regions WHERE region IN (SELECT region FROM s.sales WHERE amount > 100)

-- capture
SELECT
  country,
  __ps_1
FROM (
  SELECT
    region,
    country,
    __ps_1
  FROM (
    SELECT
      *
    FROM (
      SELECT
        region,
        country
      FROM s.regions
    ) AS q1
    JOIN (
      SELECT
        region_3 AS __key_2,
        COLLECT_SET(__ps_1) AS __ps_1
      FROM (
        SELECT
          region_2 AS region_3,
          __ps_1
        FROM (
          SELECT
            *
          FROM (
            SELECT
              region AS region_2,
              amount,
              __fragment AS __ps_1
            FROM s.sales
          ) AS q3
          WHERE
            amount > 100
        ) AS q4
      ) AS q5
      GROUP BY
        region_3
    ) AS q2
      ON region = __key_2
  ) AS q6
) AS q7
-- set: __ps_1

-- use
SELECT
  country
FROM (
  SELECT
    *
  FROM (
    SELECT
      region,
      country
    FROM s.regions
  ) AS q1
  LEFT SEMI JOIN (
    SELECT
      region_2 AS region_3
    FROM (
      SELECT
        *
      FROM (
        SELECT
          region_2,
          amount
        FROM (
          SELECT
            *
          FROM (
            SELECT
              region AS region_2,
              amount,
              id AS __sketch_id
            FROM s.sales
          ) AS q3
          WHERE
            (
              __sketch_id >= 100 AND __sketch_id < 300
            )
        ) AS q4
      ) AS q5
      WHERE
        amount > 100
    ) AS q6
  ) AS q2
    ON region = region_3
) AS q7
