-- input
SELECT region FROM s.regions r WHERE NOT EXISTS (SELECT 1 FROM s.sales s WHERE s.region = r.region)
UNION ALL
SELECT DISTINCT region FROM s.sales WHERE day > DATE '2024-01-01'

-- capture
SELECT
  *
FROM (
  SELECT
    region AS region_5,
    __ps_1
  FROM (
    SELECT
      region,
      CAST(NULL AS ARRAY<INT>) AS __ps_1
    FROM (
      SELECT
        region
      FROM (
        SELECT
          *
        FROM (
          SELECT
            region
          FROM s.regions
        ) AS q1
        LEFT ANTI JOIN (
          SELECT
            region AS region_2
          FROM s.sales
        ) AS q2
          ON region_2 = region
      ) AS q3
    ) AS q4
  ) AS q5
  UNION ALL
  SELECT
    *
  FROM (
    SELECT
      region_4,
      __ps_1
    FROM (
      SELECT
        region_4,
        COLLECT_SET(__ps_1) AS __ps_1
      FROM (
        SELECT
          region_3 AS region_4,
          __ps_1
        FROM (
          SELECT
            *
          FROM (
            SELECT
              region AS region_3,
              day,
              __fragment AS __ps_1
            FROM s.sales
          ) AS q6
          WHERE
            day > CAST('2024-01-01' AS DATE)
        ) AS q7
      ) AS q8
      GROUP BY
        region_4
    ) AS q9
  ) AS q10
) AS q11
-- set: __ps_1

-- use
SELECT
  region_5 AS region
FROM (
  SELECT
    *
  FROM (
    SELECT
      region AS region_5
    FROM (
      SELECT
        region
      FROM (
        SELECT
          *
        FROM (
          SELECT
            region
          FROM s.regions
        ) AS q1
        LEFT ANTI JOIN (
          SELECT
            region AS region_2
          FROM s.sales
        ) AS q2
          ON region_2 = region
      ) AS q3
    ) AS q4
    UNION ALL
    SELECT
      *
    FROM (
      SELECT DISTINCT
        *
      FROM (
        SELECT
          region_3 AS region_4
        FROM (
          SELECT
            *
          FROM (
            SELECT
              region_3,
              day
            FROM (
              SELECT
                *
              FROM (
                SELECT
                  region AS region_3,
                  day,
                  id AS __sketch_id
                FROM s.sales
              ) AS q5
              WHERE
                (
                  __sketch_id >= 100 AND __sketch_id < 300
                )
            ) AS q6
          ) AS q7
          WHERE
            day > CAST('2024-01-01' AS DATE)
        ) AS q8
      ) AS q9
    ) AS q10
  ) AS q11
) AS q12
