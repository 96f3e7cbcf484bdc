-- LENGTH of a text column in an aggregate: bounded by the column's public domain, else clamped.

-- title: length of comments without a declared bound
-- schema: tpch
-- expect: ZD002
-- reason: o_comment has no public domain, so its LENGTH has no bound
SELECT AVG(LENGTH(o_comment)) FROM orders;

-- title: clamped length of comments
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, AVG(LEAST(LENGTH(o_comment), 80)) AS mean_len FROM orders GROUP BY 1;
