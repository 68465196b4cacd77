-- Orders (the view `input`) with the score the service gives each: `struct(...)` passes
-- the columns by name (`struct(*)` would pass them all). `score(...).*` does not parse
-- in Spark SQL: alias the struct in a subquery.
SELECT o.order_id, o.user_id, o.amount, o.s.score AS score, o.s.label AS label,
       o.s.enrich_error AS error
FROM (SELECT *, score(struct(order_id, user_id, amount)) AS s FROM input) o
ORDER BY o.order_id;
