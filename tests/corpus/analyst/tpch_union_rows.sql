-- TPC-H: UNION ALL of private row relations in FROM (sql/unionrel.py).

-- title: activity events per source, customers and orders stacked
-- schema: tpch
-- expect: answered
SELECT source, COUNT(*) AS events
FROM (
  SELECT 'account' AS source FROM customer
  UNION ALL
  SELECT 'order' FROM orders WHERE o_orderdate >= DATE '1997-01-01'
) events
GROUP BY source
ORDER BY source;

-- title: money on record across balances and orders
-- schema: tpch
-- expect: answered
SELECT kind, SUM(amount) AS total, AVG(amount) AS typical
FROM (
  SELECT 'balance' AS kind, c_acctbal AS amount FROM customer WHERE c_acctbal > 0
  UNION ALL
  SELECT 'order', o_totalprice FROM orders
) money
GROUP BY kind;

-- title: quantities of urgent and air line items, one stream
-- schema: tpch
-- expect: answered
WITH moves AS (
  SELECT l_quantity AS qty FROM lineitem WHERE l_shipmode = 'AIR'
  UNION ALL
  SELECT l_quantity FROM lineitem WHERE l_shipmode = 'REG AIR'
)
SELECT COUNT(*) AS moves, SUM(qty) AS units FROM moves;

-- title: customers and orders by segment label
-- schema: tpch
-- expect: answered
SELECT segment, COUNT(*) AS n
FROM (
  SELECT c_mktsegment AS segment FROM customer
  UNION ALL
  SELECT 'ORDER' FROM orders
) s
GROUP BY segment
ORDER BY segment;

-- title: stacked tables with a computed column in a branch
-- schema: tpch
-- expect: 0A000
-- reason: a UNION ALL branch selects columns and constants only; compute in the outer query
SELECT SUM(amount)
FROM (
  SELECT c_acctbal * 1.1 AS amount FROM customer
  UNION ALL
  SELECT o_totalprice FROM orders
) m;

-- title: distinct customers seen in accounts or orders, with UNION
-- schema: tpch
-- expect: 0A000
-- reason: UNION (without ALL) in FROM compares rows of different people
SELECT COUNT(*)
FROM (
  SELECT c_custkey AS k FROM customer
  UNION
  SELECT o_custkey FROM orders
) ids;
