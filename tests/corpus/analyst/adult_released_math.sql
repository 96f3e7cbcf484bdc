-- Math over released aggregates: computed by dpproxy on the noisy values (sql/postmath.py,
-- release/functions.py), never by the database.

-- title: sample standard deviation via the square root of VARIANCE
-- schema: adult
-- expect: answered
SELECT education, SQRT(VARIANCE(hours_per_week)) AS sd_hours FROM adult GROUP BY education;

-- title: bits needed to count the people
-- schema: adult
-- expect: answered
SELECT LOG(2, COUNT(*)) AS bits FROM adult;

-- title: cube root of total capital gain
-- schema: adult
-- expect: answered
SELECT CBRT(SUM(capital_gain)) AS cbrt_gain FROM adult;

-- title: squared mean age by sex
-- schema: adult
-- expect: answered
SELECT sex, POWER(AVG(age), 2) AS sq_mean_age FROM adult GROUP BY sex;

-- title: mean age to one decimal through numeric
-- schema: adult
-- expect: answered
SELECT sex, ROUND(AVG(age)::numeric, 1) AS mean_age FROM adult GROUP BY sex;

-- title: coefficient of variation of hours
-- schema: adult
-- expect: answered
SELECT income_class, SQRT(VAR_POP(hours_per_week)) / AVG(hours_per_week) AS cv FROM adult GROUP BY income_class;

-- title: groups ordered by log count
-- schema: adult
-- expect: answered
SELECT race, LN(COUNT(*)) AS log_n FROM adult GROUP BY race HAVING SQRT(COUNT(*)) > 5 ORDER BY LN(COUNT(*)) DESC;

-- title: fractional power of a row value
-- schema: adult
-- expect: answered
SELECT AVG(POWER(age, 0.5)) FROM adult;

-- title: bits of capital gain, cube root of the age gap
-- schema: adult
-- expect: answered
SELECT AVG(LOG(2, capital_gain + 1)) AS bits, AVG(CBRT(age - 40)) AS gap FROM adult;

-- title: hours in ten buckets, reversed
-- schema: adult
-- expect: answered
-- compare: none
-- DuckDB has no WIDTH_BUCKET: tests/fixtures/rewrite/width_bucket.sql spells it out
SELECT WIDTH_BUCKET(hours_per_week, 99, 1, 10) AS bucket, AVG(age) AS mean_age FROM adult GROUP BY 1 ORDER BY 1;

-- title: width_bucket with a computed bound
-- schema: adult
-- expect: 0A000
-- reason: the bounds of WIDTH_BUCKET must be literals (checked before any data is read)
SELECT WIDTH_BUCKET(age, 17, age + 1, 4) AS b, COUNT(*) FROM adult GROUP BY 1;

-- title: mean hours cut to one decimal
-- schema: adult
-- expect: answered
SELECT workclass, TRUNC(AVG(hours_per_week), 1) AS mean_hours FROM adult GROUP BY workclass;
