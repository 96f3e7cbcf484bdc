-- LENGTH of a text column in an aggregate: bounded by the column's public domain or max_length,
-- else clamped.

-- title: mean length of order comments, a declared max_length
-- schema: tpch
-- expect: answered
SELECT AVG(LENGTH(o_comment)) FROM orders;

-- title: length of customer comments without a declared bound
-- schema: tpch
-- expect: ZD002
-- reason: c_comment has no public domain and no max_length, so its LENGTH has no bound
SELECT AVG(LENGTH(c_comment)) FROM customer;

-- title: clamped length of comments
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, AVG(LEAST(LENGTH(o_comment), 80)) AS mean_len FROM orders GROUP BY 1;
