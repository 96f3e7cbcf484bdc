--- TPC-H: joins of customers, orders and line items with the public tables.

-- title: customers and balance by nation
-- schema: tpch
-- expect: answered
SELECT n.n_name, COUNT(*) AS customers, AVG(c.c_acctbal) AS avg_balance
FROM customer c
JOIN nation n ON c.c_nationkey = n.n_nationkey
GROUP BY n.n_name
ORDER BY customers DESC;

-- title: revenue by region
-- schema: tpch
-- expect: answered
SELECT r_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer
JOIN orders ON o_custkey = c_custkey
JOIN lineitem ON l_orderkey = o_orderkey
JOIN nation ON c_nationkey = n_nationkey
JOIN region ON n_regionkey = r_regionkey
GROUP BY r_name
ORDER BY revenue DESC;

-- title: order value by segment, comma join
-- schema: tpch
-- expect: answered
select c_mktsegment, count(*) as orders, avg(o_totalprice) as avg_value
from customer, orders
where c_custkey = o_custkey
group by c_mktsegment;

-- title: customers without orders, LEFT JOIN
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS never_ordered
FROM customer c
LEFT JOIN orders o ON c.c_custkey = o.o_custkey
WHERE o.o_orderkey IS NULL;

-- title: orders per segment with LEFT JOIN
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, COUNT(o_orderkey) AS orders, COUNT(*) AS rows
FROM customer LEFT JOIN orders ON c_custkey = o_custkey
GROUP BY c_mktsegment;

-- title: customers per nation including empty nations, RIGHT JOIN
-- schema: tpch
-- expect: answered
SELECT n_name, COUNT(c_custkey) AS customers
FROM customer RIGHT JOIN nation ON c_nationkey = n_nationkey
GROUP BY n_name;

-- title: customers and orders, FULL OUTER JOIN
-- schema: tpch
-- expect: answered
SELECT COUNT(c_custkey) AS customers, COUNT(o_orderkey) AS orders
FROM customer FULL OUTER JOIN orders ON c_custkey = o_custkey;

-- title: revenue by brand
-- schema: tpch
-- expect: answered
SELECT p_brand, SUM(l_extendedprice * (1 - l_discount)) AS revenue
FROM lineitem JOIN part ON l_partkey = p_partkey
GROUP BY p_brand
ORDER BY revenue DESC
LIMIT 10;

-- title: revenue by supplier nation
-- schema: tpch
-- expect: answered
SELECT n_name AS supplier_nation, SUM(l_extendedprice) AS gross
FROM lineitem
JOIN supplier ON l_suppkey = s_suppkey
JOIN nation ON s_nationkey = n_nationkey
GROUP BY n_name;

-- title: discounted revenue by ship mode
-- schema: tpch
-- expect: answered
SELECT l_shipmode, SUM(l_extendedprice * (1 - l_discount)) AS revenue, AVG(l_quantity) AS avg_qty
FROM lineitem
GROUP BY l_shipmode
ORDER BY revenue DESC;

-- title: quantities by return flag and line status
-- schema: tpch
-- expect: answered
-- compare: keys 2
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first 2 columns (the group keys) occur
-- in the exact answer are compared
SELECT l_returnflag, l_linestatus, AVG(l_quantity), AVG(l_extendedprice), AVG(l_discount)
FROM lineitem
GROUP BY l_returnflag, l_linestatus;

-- title: distinct orders per segment through line items
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, COUNT(DISTINCT o_orderkey) AS orders, COUNT(*) AS items
FROM customer
JOIN orders ON c_custkey = o_custkey
JOIN lineitem ON l_orderkey = o_orderkey
GROUP BY c_mktsegment;

-- title: nations with at least 50 customers
-- schema: tpch
-- expect: answered
SELECT n_name, COUNT(*) AS customers
FROM customer JOIN nation ON c_nationkey = n_nationkey
GROUP BY n_name
HAVING COUNT(*) >= 50
ORDER BY customers DESC;

-- title: share of revenue by region
-- schema: tpch
-- expect: answered
SELECT r_name,
       SUM(o_totalprice) / SUM(SUM(o_totalprice)) OVER () AS share
FROM orders
JOIN customer ON o_custkey = c_custkey
JOIN nation ON c_nationkey = n_nationkey
JOIN region ON n_regionkey = r_regionkey
GROUP BY r_name;

-- title: nations ranked by order value
-- schema: tpch
-- expect: answered
SELECT n_name, SUM(o_totalprice) AS value, RANK() OVER (ORDER BY SUM(o_totalprice) DESC) AS rnk
FROM orders
JOIN customer ON o_custkey = c_custkey
JOIN nation ON c_nationkey = n_nationkey
GROUP BY n_name
ORDER BY rnk;

-- title: median account balance by segment
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY c_acctbal) AS median_balance
FROM customer
GROUP BY c_mktsegment;

-- title: customers in debt by segment
-- schema: tpch
-- expect: answered
SELECT c_mktsegment, COUNT(*) FILTER (WHERE c_acctbal < 0) AS in_debt, COUNT(*) AS customers
FROM customer
GROUP BY c_mktsegment
ORDER BY in_debt DESC;

-- title: balance spread by nation key
-- schema: tpch
-- expect: answered
SELECT c_nationkey, STDDEV(c_acctbal) AS sd_balance FROM customer GROUP BY c_nationkey;

-- title: supply cost of the parts sold
-- schema: tpch
-- expect: answered
SELECT SUM(ps_supplycost * l_quantity) AS cost
FROM lineitem
JOIN partsupp ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey;

-- title: promotion share of revenue
-- schema: tpch
-- expect: answered
SELECT 100.0 * SUM(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
       / SUM(l_extendedprice * (1 - l_discount)) AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey;

-- title: phone country code of customers
-- schema: tpch
-- expect: answered
SELECT SUBSTRING(c_phone, 1, 2) AS cntrycode, COUNT(*) AS numcust, SUM(c_acctbal) AS totacctbal
FROM customer
GROUP BY 1
ORDER BY 1;

-- title: mean balance by balance band
-- schema: tpch
-- expect: answered
SELECT CASE WHEN c_acctbal < 0 THEN 'negative'
            WHEN c_acctbal < 5000 THEN 'low'
            ELSE 'high' END AS band,
       COUNT(*), ROUND(AVG(c_acctbal), 2)
FROM customer
GROUP BY 1;

-- title: line items per order size, USING-free three-way comma join
-- schema: tpch
-- expect: answered
SELECT n_name, COUNT(*) AS items
FROM customer c, orders o, lineitem l, nation n
WHERE c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey AND c.c_nationkey = n.n_nationkey
  AND l.l_returnflag = 'R'
GROUP BY n_name;

-- title: line items per order priority including orders without items, LEFT JOIN
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, COUNT(l_orderkey) AS items, COUNT(*) AS rows
FROM orders LEFT JOIN lineitem ON o_orderkey = l_orderkey
GROUP BY o_orderpriority;

-- title: account balance per nation, public nation LEFT JOIN customer
-- schema: tpch
-- expect: answered
SELECT n_name, COUNT(c_custkey) AS customers, SUM(c_acctbal) AS balance
FROM nation LEFT JOIN customer ON c_nationkey = n_nationkey
GROUP BY n_name;

-- title: rows per nation with COUNT(*), RIGHT JOIN
-- schema: tpch
-- expect: 0A000
-- reason: COUNT(*) would count the nations without customers, whose number depends on the private data
SELECT n_name, COUNT(*) AS n
FROM customer RIGHT JOIN nation ON c_nationkey = n_nationkey
GROUP BY n_name;

-- title: customers without a large order, LEFT JOIN with a filter in ON
-- schema: tpch
-- expect: 0A000
-- reason: an outer join's ON may hold column equalities only
SELECT COUNT(*) AS without_large
FROM customer LEFT JOIN orders ON c_custkey = o_custkey AND o_totalprice > 300000
WHERE o_orderkey IS NULL;
