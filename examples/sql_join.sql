-- Orders (the view `input`) joined with their users as a table: every input column, then
-- the user's name and tier, and `enrich_error` (the reason, where a lookup failed).
-- `TABLE(input) PARTITION BY user_id` would route each user's orders to one task.
SELECT * FROM users_join(TABLE(input))
ORDER BY order_id;
