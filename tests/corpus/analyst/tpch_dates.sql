--- TPC-H: questions about time (order, ship, commit and receipt dates).

-- title: orders per year
-- schema: tpch
-- expect: answered
SELECT EXTRACT(YEAR FROM o_orderdate) AS yr, COUNT(*) AS orders
FROM orders
GROUP BY yr
ORDER BY yr;

-- title: monthly order value
-- schema: tpch
-- expect: answered
SELECT DATE_TRUNC('month', o_orderdate) AS month, SUM(o_totalprice) AS value
FROM orders
WHERE o_orderdate >= DATE '1996-01-01' AND o_orderdate < DATE '1997-01-01'
GROUP BY 1
ORDER BY 1;

-- title: orders in a quarter, INTERVAL
-- schema: tpch
-- expect: answered
SELECT o_orderpriority, COUNT(*) AS n
FROM orders
WHERE o_orderdate >= DATE '1995-01-01'
  AND o_orderdate < DATE '1995-01-01' + INTERVAL '3 months'
GROUP BY o_orderpriority
ORDER BY o_orderpriority;

-- title: orders in the last 30 years, CURRENT_DATE
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM orders WHERE o_orderdate > CURRENT_DATE - INTERVAL '30 years';

-- title: average days from ship to receipt by ship mode
-- schema: tpch
-- expect: answered
SELECT l_shipmode, AVG(l_receiptdate - l_shipdate) AS days_in_transit
FROM lineitem
GROUP BY l_shipmode;

-- title: late deliveries by ship mode
-- schema: tpch
-- expect: answered
SELECT l_shipmode,
       COUNT(*) FILTER (WHERE l_receiptdate > l_commitdate) AS late,
       COUNT(*) AS total
FROM lineitem
GROUP BY l_shipmode
ORDER BY l_shipmode;

-- title: orders per quarter of 1997
-- schema: tpch
-- expect: answered
SELECT EXTRACT(QUARTER FROM o_orderdate) AS q, COUNT(*)
FROM orders
WHERE EXTRACT(YEAR FROM o_orderdate) = 1997
GROUP BY 1
ORDER BY 1;

-- title: shipments by day of week
-- schema: tpch
-- expect: answered
SELECT EXTRACT(DOW FROM l_shipdate) AS dow, COUNT(*) AS items FROM lineitem GROUP BY dow ORDER BY dow;

-- title: revenue of 1994 with BETWEEN
-- schema: tpch
-- expect: answered
SELECT SUM(l_extendedprice * (1 - l_discount)) AS revenue
FROM lineitem
WHERE l_shipdate BETWEEN DATE '1994-01-01' AND DATE '1994-12-31';

-- title: yearly order value, DATE_TRUNC year
-- schema: tpch
-- expect: answered
select date_trunc('year', o_orderdate) as yr, sum(o_totalprice) as total, avg(o_totalprice) as mean
from orders
group by 1
order by 1;

-- title: urgent orders in 1996 by status
-- schema: tpch
-- expect: answered
-- compare: keys 1
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first column (the group key) occurs
-- in the exact answer are compared
SELECT o_orderstatus, COUNT(*)
FROM orders
WHERE o_orderdate >= '1996-01-01' AND o_orderdate < '1997-01-01' AND o_orderpriority = '1-URGENT'
GROUP BY o_orderstatus;

-- title: orders per year with DATE_PART
-- schema: tpch
-- expect: answered
SELECT DATE_PART('year', o_orderdate) AS yr, COUNT(*) FROM orders GROUP BY 1 ORDER BY 1;

-- title: pricing summary until 90 days before the end
-- schema: tpch
-- expect: answered
-- compare: keys 2
SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS qty, AVG(l_discount) AS avg_disc, COUNT(*) AS n
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus;

-- title: order month as text, TO_CHAR
-- schema: tpch
-- expect: answered
SELECT TO_CHAR(o_orderdate, 'YYYY-MM') AS ym, COUNT(*) FROM orders GROUP BY 1;

-- title: orders of 1995 by text prefix of the date
-- schema: tpch
-- expect: answered
SELECT COUNT(*) FROM orders WHERE CAST(o_orderdate AS TEXT) LIKE '1995%';

-- title: items shipped within a week of the order
-- schema: tpch
-- expect: answered
SELECT COUNT(*) AS fast
FROM orders JOIN lineitem ON l_orderkey = o_orderkey
WHERE l_shipdate <= o_orderdate + INTERVAL '7 days';

-- title: customers who ordered, by year
-- schema: tpch
-- expect: answered
SELECT EXTRACT(YEAR FROM o_orderdate) AS yr, COUNT(DISTINCT o_custkey) AS active_customers
FROM orders
GROUP BY 1
ORDER BY 1;

-- title: month of year seasonality
-- schema: tpch
-- expect: answered
SELECT EXTRACT(MONTH FROM o_orderdate) AS m, AVG(o_totalprice) AS avg_value
FROM orders
GROUP BY 1
ORDER BY 1;

-- title: orders by year as text, TO_CHAR
-- schema: tpch
-- expect: answered
SELECT TO_CHAR(o_orderdate, 'YYYY') AS y, COUNT(*) AS n FROM orders GROUP BY 1 ORDER BY 1;

-- title: order month name, TO_CHAR
-- schema: tpch
-- expect: 42883
-- reason: TO_CHAR templates beyond YYYY, MM, DD print differently per engine and locale
SELECT TO_CHAR(o_orderdate, 'Mon YYYY') AS m, COUNT(*) FROM orders GROUP BY 1;
