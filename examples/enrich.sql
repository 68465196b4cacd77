-- Orders (the view `input`) with their user's name and tier; a miss or a null key gives
-- NULLs (a left join). `dim_user(...).*` does not parse in Spark SQL: alias the struct.
SELECT o.order_id, o.user_id, o.amount, o.u.name AS name, o.u.tier AS tier
FROM (SELECT *, dim_user(user_id) AS u FROM input) o
ORDER BY o.order_id;
