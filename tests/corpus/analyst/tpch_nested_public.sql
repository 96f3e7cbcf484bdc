--- TPC-H: aggregates over per-customer aggregates, semi-joins, scalar subqueries, set
--- operations, questions about the public tables only, and what must stay refused.

-- title: distribution of orders per customer
-- schema: tpch
-- expect: answered
SELECT n_orders, COUNT(*) AS customers
FROM (SELECT c_custkey, COUNT(*) AS n_orders
      FROM customer JOIN orders ON o_custkey = c_custkey
      GROUP BY c_custkey) t
GROUP BY n_orders
ORDER BY n_orders;

-- title: average orders per ordering customer
-- schema: tpch
-- expect: ZD002
-- reason: AVG(n_orders) needs finite bounds (within ±1e100)
SELECT AVG(n_orders) FROM (SELECT o_custkey, COUNT(*) AS n_orders FROM orders GROUP BY o_custkey) t;

-- title: customers by total spend band, CTE
-- schema: tpch
-- expect: answered
WITH spend AS (
  SELECT o_custkey, SUM(o_totalprice) AS total FROM orders GROUP BY o_custkey
)
SELECT CASE WHEN total < 1000000 THEN 'under 1M' ELSE '1M or more' END AS band, COUNT(*)
FROM spend
GROUP BY 1;

-- title: customer order counts including zero, LEFT JOIN
-- schema: tpch
-- expect: answered
SELECT c_count, COUNT(*) AS custdist
FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count
      FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey
      GROUP BY c_custkey) AS c_orders
GROUP BY c_count
ORDER BY custdist DESC, c_count DESC;

-- title: customers with more than 20 orders
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM (SELECT o_custkey FROM orders GROUP BY o_custkey HAVING COUNT(*) > 20) t;

-- title: median spend per customer
-- schema: tpch
-- expect: ZD002
-- reason: PERCENTILE_CONT(total) needs finite bounds (within ±1e100)
SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY total)
FROM (SELECT o_custkey, SUM(o_totalprice) AS total FROM orders GROUP BY o_custkey) s;

-- title: customers with an urgent order, EXISTS
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, COUNT(*)
FROM customer c
WHERE EXISTS (SELECT 1 FROM orders o WHERE o.o_custkey = c.c_custkey AND o.o_orderpriority = '1-URGENT')
GROUP BY c_mktsegment;

-- title: customers without orders, NOT EXISTS
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM customer c WHERE NOT EXISTS (SELECT * FROM orders o WHERE o.o_custkey = c.c_custkey);

-- title: European customers, IN a public subquery
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, COUNT(*), AVG(c_acctbal)
FROM customer
WHERE c_nationkey IN (SELECT n_nationkey FROM nation JOIN region ON n_regionkey = r_regionkey
                      WHERE r_name = 'EUROPE')
GROUP BY c_mktsegment;

-- title: orders with an air shipment, IN
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, COUNT(*)
FROM orders
WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem WHERE l_shipmode = 'AIR')
GROUP BY o_orderpriority;

-- title: items of parts priced above average, public scalar subquery
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS items
FROM lineitem JOIN part ON l_partkey = p_partkey
WHERE p_retailprice > (SELECT AVG(p_retailprice) FROM part);

-- title: customers above the average balance
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM customer WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer);

-- title: items not from Algerian suppliers, NOT IN
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM lineitem
WHERE l_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_nationkey = 0);

-- title: orders with a late item, EXISTS on line items
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, COUNT(*) AS order_count
FROM orders
WHERE EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
GROUP BY o_orderpriority
ORDER BY o_orderpriority;

-- title: segment and priority counts in one result, UNION ALL
-- schema: tpch
-- expect: answered
SELECT 'segment' AS kind, c_mktsegment AS value, COUNT(*) AS n FROM customer GROUP BY c_mktsegment
UNION ALL
SELECT 'priority', o_orderpriority, COUNT(*) FROM orders GROUP BY o_orderpriority;

-- title: regions with nations, public join
-- schema: tpch
-- expect: answered
SELECT r_name, COUNT(*) AS nations FROM nation JOIN region ON n_regionkey = r_regionkey GROUP BY r_name;

-- title: the region table
-- schema: tpch
-- expect: answered
SELECT * FROM region;

-- title: average retail price by brand
-- schema: tpch
-- expect: answered
SELECT p_brand, AVG(p_retailprice) AS avg_price FROM part GROUP BY p_brand ORDER BY p_brand;

-- title: suppliers per nation
-- schema: tpch
-- expect: answered
SELECT n_name, COUNT(*) FROM supplier, nation WHERE s_nationkey = n_nationkey GROUP BY n_name ORDER BY 2 DESC;

-- title: stock value
-- schema: tpch
-- expect: answered
SELECT SUM(ps_availqty * ps_supplycost) AS stock_value FROM partsupp;

-- title: green parts by size
-- schema: tpch
-- expect: answered
SELECT p_size, COUNT(*) FROM part WHERE p_name LIKE '%green%' GROUP BY p_size ORDER BY p_size;

-- title: richest suppliers
-- schema: tpch
-- expect: answered
SELECT s_name, s_acctbal FROM supplier ORDER BY s_acctbal DESC LIMIT 10;

-- title: distinct part types
-- schema: tpch
-- expect: answered
SELECT COUNT(DISTINCT p_type) FROM part;

-- title: top customers by balance
-- schema: tpch
-- expect: 42501
-- reason: a row-level read
SELECT c_name, c_acctbal FROM customer ORDER BY c_acctbal DESC LIMIT 10;

-- title: balance per customer
-- schema: tpch
-- expect: 42501
-- reason: grouping by the privacy unit
SELECT c_custkey, SUM(c_acctbal) FROM customer GROUP BY c_custkey;

-- title: order value per customer
-- schema: tpch
-- expect: 42501
-- reason: grouping by the privacy unit
SELECT o_custkey, SUM(o_totalprice) AS spend FROM orders GROUP BY o_custkey ORDER BY spend DESC LIMIT 10;

-- title: a few orders
-- schema: tpch
-- expect: 42501
-- reason: a row-level read
SELECT * FROM orders LIMIT 5;

-- title: pairs of orders of the same customer
-- schema: tpch
-- expect: 0A000
-- reason: a self-join of a private table
SELECT COUNT(*) FROM orders o1 JOIN orders o2 ON o1.o_custkey = o2.o_custkey;

-- title: sum of order keys
-- schema: tpch
-- expect: ZD002
-- reason: an identifier has no bounds
SELECT SUM(o_orderkey) FROM orders;

-- title: orders joined on the wrong key
-- schema: tpch
-- expect: 0A000
-- reason: the join mixes customers
SELECT COUNT(*) FROM customer c JOIN orders o ON c.c_nationkey = o.o_custkey;

-- title: big orders
-- schema: tpch
-- expect: 42501
-- reason: a row-level read
SELECT o_orderkey, o_totalprice FROM orders WHERE o_totalprice > 500000;

-- title: customer names by nation
-- schema: tpch
-- expect: 42501
-- reason: a row-level read
SELECT n_name, c_name FROM customer JOIN nation ON c_nationkey = n_nationkey WHERE n_name = 'FRANCE';

-- title: phone numbers of big balances
-- schema: tpch
-- expect: 42501
-- reason: DISTINCT without an aggregate reads rows
SELECT DISTINCT c_phone FROM customer WHERE c_acctbal > 9000;

-- title: order counts by status, three branches, largest first
-- schema: tpch
-- expect: answered
SELECT 'finished' AS status, COUNT(*) AS n FROM orders WHERE o_orderstatus = 'F'
UNION ALL
SELECT 'open', COUNT(*) FROM orders WHERE o_orderstatus = 'O'
UNION ALL
SELECT 'pending', COUNT(*) FROM orders WHERE o_orderstatus = 'P'
ORDER BY n DESC;
