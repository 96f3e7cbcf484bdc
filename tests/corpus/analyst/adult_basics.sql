--- Everyday questions about the Adult census extract: counts, sums, averages, by group.

-- title: how many people
-- schema: adult
-- expect: answered
SELECT COUNT(*) FROM adult;

-- title: average age by sex
-- schema: adult
-- expect: answered
select sex, avg(age) as avg_age
from adult
group by sex
order by avg_age desc;

-- title: high income rate by education
-- schema: adult
-- expect: answered
SELECT education,
       COUNT(*) AS n,
       AVG(CASE WHEN income_class = '>50K' THEN 1.0 ELSE 0 END) AS high_income_rate
FROM adult
GROUP BY education
ORDER BY high_income_rate DESC;

-- title: people by race, group by position
-- schema: adult
-- expect: answered
SELECT race, COUNT(*) FROM adult GROUP BY 1 ORDER BY 2 DESC;

-- title: top occupations by total capital gain
-- schema: adult
-- expect: answered
SELECT occupation, SUM(capital_gain) AS total_gain
FROM adult
WHERE occupation IS NOT NULL
GROUP BY occupation
ORDER BY total_gain DESC
LIMIT 5;

-- title: weekly hours by workclass and sex
-- schema: adult
-- expect: answered
-- compare: keys 2
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first 2 columns (the group keys) occur
-- in the exact answer are compared
SELECT workclass, sex, AVG(hours_per_week) AS avg_hours, COUNT(*) AS n
FROM adult
WHERE workclass IS NOT NULL
GROUP BY workclass, sex
ORDER BY workclass, sex;

-- title: countries with more than 100 people
-- schema: adult
-- expect: answered
SELECT native_country, COUNT(*) AS n
FROM adult
GROUP BY native_country
HAVING COUNT(*) > 100
ORDER BY n DESC;

-- title: high earners with FILTER
-- schema: adult
-- expect: answered
SELECT sex,
       COUNT(*) FILTER (WHERE income_class = '>50K') AS high_earners,
       COUNT(*) AS total
FROM adult
GROUP BY sex;

-- title: high income rate by marital status
-- schema: adult
-- expect: answered
SELECT marital_status,
       COUNT(*) FILTER (WHERE income_class = '>50K') * 1.0 / COUNT(*) AS rate
FROM adult
GROUP BY marital_status
ORDER BY rate DESC;

-- title: spread of weekly hours by education
-- schema: adult
-- expect: answered
SELECT education, AVG(hours_per_week) AS mean_hours, STDDEV(hours_per_week) AS sd_hours
FROM adult
GROUP BY education;

-- title: population variance of age by sex
-- schema: adult
-- expect: answered
SELECT sex, VAR_POP(age) AS var_age, VAR_SAMP(age) AS var_age_sample FROM adult GROUP BY sex;

-- title: distinct occupations per sex
-- schema: adult
-- expect: answered
SELECT sex, COUNT(DISTINCT occupation) AS occupations FROM adult GROUP BY sex;

-- title: how many countries are represented
-- schema: adult
-- expect: answered
SELECT COUNT(DISTINCT native_country) AS countries FROM adult;

-- title: sum of distinct capital losses
-- schema: adult
-- expect: answered
SELECT SUM(DISTINCT capital_loss) FROM adult;

-- title: average of distinct ages
-- schema: adult
-- expect: answered
SELECT AVG(DISTINCT age) FROM adult;

-- title: distinct people
-- schema: adult
-- expect: answered
SELECT COUNT(DISTINCT person_id) AS people FROM adult;

-- title: full-time workers aged 25 to 34
-- schema: adult
-- expect: answered
SELECT COUNT(*) AS n FROM adult WHERE age BETWEEN 25 AND 34 AND hours_per_week >= 40;

-- title: hours of the self-employed and private sector
-- schema: adult
-- expect: answered
-- compare: keys 1
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first column (the group key) occurs
-- in the exact answer are compared
SELECT workclass, AVG(hours_per_week)
FROM adult
WHERE workclass IN ('Private', 'Self-emp-inc', 'Self-emp-not-inc')
GROUP BY workclass;

-- title: missing occupation
-- schema: adult
-- expect: answered
SELECT COUNT(*) AS missing_occupation FROM adult WHERE occupation IS NULL;

-- title: unknown workclass as a label, grouped by alias
-- schema: adult
-- expect: answered
SELECT COALESCE(workclass, 'Unknown') AS wc, COUNT(*) AS n FROM adult GROUP BY wc ORDER BY n DESC;

-- title: mean capital gain by years of education, ordered by alias
-- schema: adult
-- expect: answered
SELECT education_num AS years, AVG(capital_gain) AS mean_gain
FROM adult
GROUP BY education_num
ORDER BY years;

-- title: youngest and oldest by income class
-- schema: adult
-- expect: answered
-- compare: none
-- MIN and MAX are order statistics, released through a DP selection even with the noise off
SELECT income_class, MIN(age) AS youngest, MAX(age) AS oldest FROM adult GROUP BY income_class;

-- title: median age
-- schema: adult
-- expect: answered
SELECT MEDIAN(age) FROM adult;

-- title: 90th percentile of weekly hours
-- schema: adult
-- expect: answered
SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY hours_per_week) AS p90_hours FROM adult;

-- title: median hours by sex
-- schema: adult
-- expect: answered
SELECT sex, PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY hours_per_week) AS median_hours
FROM adult
GROUP BY sex;

-- title: rounded mean and standard deviation of age
-- schema: adult
-- expect: answered
SELECT sex, ROUND(AVG(age), 1) AS avg_age, ROUND(STDDEV_SAMP(age), 2) AS sd_age
FROM adult
GROUP BY sex;

-- title: correlation of age and hours
-- schema: adult
-- expect: answered
-- compare: none
-- CORR is answered by sample-and-aggregate over disjoint subsamples, not the exact statistic
SELECT CORR(age, hours_per_week) FROM adult;

-- title: net capital by income class
-- schema: adult
-- expect: answered
SELECT income_class, SUM(capital_gain - capital_loss) AS net_capital
FROM adult
GROUP BY income_class;

-- title: women earning more than 50K, lower case
-- schema: adult
-- expect: answered
select count(*) as n from adult where sex = 'Female' and income_class = '>50K';

-- title: occupation answered vs total
-- schema: adult
-- expect: answered
SELECT COUNT(occupation) AS answered, COUNT(*) AS total FROM adult;

-- title: quartiles of age
-- schema: adult
-- expect: answered
SELECT PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY age) AS q1,
       PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) AS q2,
       PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY age) AS q3
FROM adult;

-- title: average age of married people by relationship
-- schema: adult
-- expect: answered
-- compare: keys 1
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first column (the group key) occurs
-- in the exact answer are compared
SELECT a.relationship, AVG(a.age) AS mean_age
FROM adult AS a
WHERE a.marital_status IN ('Married-civ-spouse', 'Married-AF-spouse')
GROUP BY a.relationship
ORDER BY mean_age;

-- title: share of people with any capital gain, by race
-- schema: adult
-- expect: answered
SELECT race, AVG(CASE WHEN capital_gain > 0 THEN 1 ELSE 0 END) AS share_with_gain
FROM adult
GROUP BY race;

-- title: people per native country and sex
-- schema: adult
-- expect: answered
-- compare: keys 2
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first 2 columns (the group keys) occur
-- in the exact answer are compared
SELECT native_country, sex, COUNT(*) FROM adult GROUP BY native_country, sex;

-- title: total weight by sex
-- schema: adult
-- expect: answered
SELECT sex, SUM(fnlwgt) AS population_estimate FROM adult GROUP BY sex;
