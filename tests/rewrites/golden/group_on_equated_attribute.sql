-- input
SELECT b.id, COUNT(*) AS n FROM s.sales a JOIN s.sales b ON a.id = b.id WHERE a.amount > 0 GROUP BY b.id ORDER BY n DESC LIMIT 3

-- capture
SELECT
  id_3,
  n
FROM (
  SELECT
    id_2 AS id_3,
    n
  FROM (
    SELECT
      id_2,
      COUNT(*) AS n
    FROM (
      SELECT
        *
      FROM (
        SELECT
          *
        FROM (
          SELECT
            id,
            amount
          FROM s.sales
        ) AS q2
        JOIN (
          SELECT
            id AS id_2
          FROM s.sales
        ) AS q3
          ON id = id_2
      ) AS q4
      WHERE
        amount > 0
    ) AS q5
    GROUP BY
      id_2
  ) AS q6
) AS q1
ORDER BY
  q1.n DESC
LIMIT 3
-- delayed: __ps_1 = fragment of id_3
-- delayed: __ps_2 = fragment of id_3

-- use
SELECT
  id_3 AS id,
  n
FROM (
  SELECT
    id_2 AS id_3,
    n
  FROM (
    SELECT
      id_2,
      COUNT(*) AS n
    FROM (
      SELECT
        *
      FROM (
        SELECT
          *
        FROM (
          SELECT
            id,
            amount
          FROM s.sales AS q4
          WHERE
            (
              id >= 100 AND id < 300
            )
        ) AS q2
        JOIN (
          SELECT
            *
          FROM (
            SELECT
              id AS id_2
            FROM s.sales
          ) AS q5
          WHERE
            (
              id_2 >= 100 AND id_2 < 300
            )
        ) AS q3
          ON id = id_2
      ) AS q6
      WHERE
        amount > 0
    ) AS q7
    GROUP BY
      id_2
  ) AS q8
) AS q1
ORDER BY
  q1.n DESC
LIMIT 3
