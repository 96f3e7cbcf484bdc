--- Buckets, CASE expressions and math over the Adult extract.

-- title: age bands
-- schema: adult
-- expect: answered
SELECT CASE WHEN age < 25 THEN '17-24'
            WHEN age < 35 THEN '25-34'
            WHEN age < 50 THEN '35-49'
            WHEN age < 65 THEN '50-64'
            ELSE '65+' END AS age_band,
       COUNT(*) AS people
FROM adult
GROUP BY 1
ORDER BY 1;

-- title: high income rate by hours band
-- schema: adult
-- expect: answered
SELECT CASE WHEN hours_per_week < 35 THEN 'part time'
            WHEN hours_per_week <= 40 THEN 'full time'
            ELSE 'overtime' END AS schedule,
       AVG(CASE WHEN income_class = '>50K' THEN 1 ELSE 0 END) AS rate_high_income
FROM adult
GROUP BY schedule
ORDER BY rate_high_income DESC;

-- title: people by decade of age
-- schema: adult
-- expect: answered
SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM adult GROUP BY decade ORDER BY decade;

-- title: any capital gain yes or no
-- schema: adult
-- expect: answered
SELECT CASE WHEN capital_gain > 0 THEN 'yes' ELSE 'no' END AS has_gain, COUNT(*), AVG(age)
FROM adult
GROUP BY CASE WHEN capital_gain > 0 THEN 'yes' ELSE 'no' END;

-- title: education level groups and hours
-- schema: adult
-- expect: answered
SELECT CASE WHEN education_num <= 8 THEN 'no diploma'
            WHEN education_num <= 10 THEN 'high school'
            WHEN education_num <= 13 THEN 'college'
            ELSE 'graduate' END AS level,
       AVG(hours_per_week) AS hours,
       COUNT(*) AS n
FROM adult
GROUP BY 1;

-- title: sex and income combined label
-- schema: adult
-- expect: answered
SELECT CASE WHEN sex = 'Male' AND income_class = '>50K' THEN 'men, high'
            WHEN sex = 'Male' THEN 'men, low'
            WHEN income_class = '>50K' THEN 'women, high'
            ELSE 'women, low' END AS cell,
       COUNT(*)
FROM adult
GROUP BY 1
ORDER BY 1;

-- title: hours bands with at least 1000 people
-- schema: adult
-- expect: answered
SELECT (hours_per_week / 10) * 10 AS hours_band, COUNT(*) AS n
FROM adult
GROUP BY hours_band
HAVING COUNT(*) >= 1000
ORDER BY hours_band;

-- title: width_bucket of age
-- schema: adult
-- expect: answered
-- compare: none
-- DuckDB has no WIDTH_BUCKET: tests/integration/test_width_bucket_forms.py checks PostgreSQL's
SELECT WIDTH_BUCKET(age, 17, 90, 8) AS bucket, COUNT(*) FROM adult GROUP BY bucket ORDER BY bucket;

-- title: mean capital gain by age band, highest first
-- schema: adult
-- expect: answered
SELECT CASE WHEN age < 30 THEN 'under 30' WHEN age < 50 THEN '30-49' ELSE '50+' END AS band,
       AVG(capital_gain) AS avg_gain
FROM adult
GROUP BY 1
ORDER BY avg_gain DESC;

-- title: sign of net capital
-- schema: adult
-- expect: answered
SELECT SIGN(capital_gain - capital_loss) AS direction, COUNT(*) FROM adult GROUP BY 1 ORDER BY 1;

-- title: standard deviation as square root of the variance
-- schema: adult
-- expect: answered
SELECT sex, SQRT(VAR_POP(age)) AS sd_age FROM adult GROUP BY sex;

-- title: mean log capital gain
-- schema: adult
-- expect: answered
SELECT income_class, AVG(LN(1 + capital_gain)) AS mean_log_gain FROM adult GROUP BY income_class;

-- title: mean squared age
-- schema: adult
-- expect: answered
SELECT AVG(POWER(age, 2)) AS mean_sq_age FROM adult;

-- title: geometric mean of hours
-- schema: adult
-- expect: answered
SELECT EXP(AVG(LN(hours_per_week))) AS geo_mean_hours FROM adult;

-- title: log10 of total weight
-- schema: adult
-- expect: answered
SELECT LOG(SUM(fnlwgt)) AS log_weight FROM adult;

-- title: age modulo 5
-- schema: adult
-- expect: answered
SELECT MOD(age, 5) AS r, COUNT(*) FROM adult GROUP BY r ORDER BY r;

-- title: even and odd ages with percent operator
-- schema: adult
-- expect: answered
SELECT age % 2 AS parity, COUNT(*) AS n FROM adult GROUP BY age % 2;

-- title: hours in tens, rounded up
-- schema: adult
-- expect: answered
SELECT CEIL(hours_per_week / 10.0) AS tens, COUNT(*) FROM adult GROUP BY 1 ORDER BY 1;

-- title: mean weight to the nearest thousand
-- schema: adult
-- expect: answered
SELECT race, ROUND(AVG(fnlwgt), -3) AS mean_weight FROM adult GROUP BY race;

-- title: mean absolute net capital
-- schema: adult
-- expect: answered
SELECT AVG(ABS(capital_gain - capital_loss)) FROM adult;

-- title: weighted mean age
-- schema: adult
-- expect: answered
SELECT SUM(age * fnlwgt) / SUM(fnlwgt) AS weighted_mean_age FROM adult;

-- title: mean hours capped at 60
-- schema: adult
-- expect: answered
-- compare: keys 1
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first column (the group key) occurs
-- in the exact answer are compared
SELECT occupation, AVG(LEAST(hours_per_week, 60)) AS capped_hours
FROM adult
WHERE occupation IS NOT NULL
GROUP BY occupation;

-- title: gains over losses
-- schema: adult
-- expect: answered
SELECT education, SUM(capital_gain) / NULLIF(SUM(capital_loss), 0) AS gain_loss_ratio
FROM adult
GROUP BY education;

-- title: percent women
-- schema: adult
-- expect: answered
SELECT 100.0 * COUNT(*) FILTER (WHERE sex = 'Female') / COUNT(*) AS pct_women FROM adult;

-- title: mean square root of hours
-- schema: adult
-- expect: answered
SELECT AVG(SQRT(hours_per_week)) FROM adult;

-- title: age floor of half decades
-- schema: adult
-- expect: answered
SELECT FLOOR(age / 5.0) * 5 AS from_age, AVG(hours_per_week) AS hours
FROM adult
GROUP BY FLOOR(age / 5.0) * 5
ORDER BY from_age;

-- title: coefficient of variation of hours
-- schema: adult
-- expect: answered
SELECT STDDEV_POP(hours_per_week) / AVG(hours_per_week) AS cv FROM adult;

-- title: mean of GREATEST of gain and loss
-- schema: adult
-- expect: answered
SELECT AVG(GREATEST(capital_gain, capital_loss)) AS biggest_flow FROM adult;

-- title: people per hundred-thousand weight band
-- schema: adult
-- expect: answered
SELECT ROUND(fnlwgt, -5) AS band, COUNT(*) AS n FROM adult GROUP BY 1 ORDER BY 1;
