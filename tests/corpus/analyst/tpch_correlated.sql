--- TPC-H: correlated subqueries keyed on a public table (planning/keyed.py), aggregate CTEs and
--- subqueries grouped by a public-domain key (planning/relations.py), and a scalar subquery in
--- arithmetic over released aggregates; and the shapes that stay refused.

-- title: partsupp rows stocked above their 1995 sales
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS plentiful
FROM partsupp
WHERE ps_partkey < 200
  AND ps_availqty > (
    SELECT SUM(l_quantity) FROM lineitem
    WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
      AND l_shipdate >= DATE '1995-01-01' AND l_shipdate < DATE '1996-01-01'
  );

-- title: small orders of a brand, below their part's average quantity
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS small_items, SUM(l_extendedprice) AS revenue
FROM lineitem JOIN part ON p_partkey = l_partkey
WHERE p_brand = 'Brand#13' AND p_size < 20
  AND l_quantity < (SELECT AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey);

-- title: size-1 parts nobody ordered in 1998
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS unsold
FROM part p
WHERE p.p_size = 1
  AND 0 = (SELECT COUNT(*) FROM lineitem l WHERE l.l_partkey = p.p_partkey
           AND l.l_shipdate >= DATE '1998-01-01');

-- title: best supplier revenue per nation, through a CTE
-- schema: tpch
-- expect: answered
WITH rev AS (
  SELECT l_suppkey, SUM(l_extendedprice * (1 - l_discount)) AS total
  FROM lineitem
  WHERE l_shipdate >= DATE '1997-01-01'
  GROUP BY l_suppkey
)
SELECT n_name, MAX(total) AS best
FROM rev JOIN supplier ON s_suppkey = l_suppkey JOIN nation ON n_nationkey = s_nationkey
GROUP BY n_name
ORDER BY n_name;

-- title: average number of orders per priority
-- schema: tpch
-- expect: answered
SELECT AVG(n) AS avg_orders
FROM (SELECT o_orderpriority, COUNT(*) AS n FROM orders GROUP BY o_orderpriority) t;

-- title: percentage of orders per priority
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, COUNT(*) * 100.0 / (SELECT COUNT(*) FROM orders) AS pct
FROM orders
GROUP BY o_orderpriority
ORDER BY o_orderpriority;

-- title: orders above their customer's average
-- schema: tpch
-- expect: 0A000
-- reason: a correlated subquery keyed on a private table (each customer's own average)
SELECT COUNT(*)
FROM orders o
WHERE o.o_totalprice > (SELECT AVG(o2.o_totalprice) FROM orders o2
                        WHERE o2.o_custkey = o.o_custkey);

-- title: busiest clerk's order count
-- schema: tpch
-- expect: 0A000
-- reason: an aggregate subquery grouped by a key with no public domain (o_clerk)
SELECT MAX(n) AS busiest FROM (SELECT o_clerk, COUNT(*) AS n FROM orders GROUP BY o_clerk) c;

-- title: line items above their part's average, compared with a range
-- schema: tpch
-- expect: 0A000
-- reason: a correlated subquery that reads the outer row other than by an equality
SELECT COUNT(*)
FROM lineitem JOIN part ON p_partkey = l_partkey
WHERE p_size = 3
  AND l_quantity > (SELECT AVG(l_quantity) FROM lineitem WHERE l_partkey BETWEEN p_partkey AND p_partkey + 10);
