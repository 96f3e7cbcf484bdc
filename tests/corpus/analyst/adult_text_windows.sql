--- Text functions, casts and window functions over the Adult extract.

-- title: education in lower case
-- schema: adult
-- expect: answered
SELECT LOWER(education) AS edu, COUNT(*) FROM adult GROUP BY LOWER(education);

-- title: sex in upper case
-- schema: adult
-- expect: answered
SELECT UPPER(sex) AS sex, AVG(hours_per_week) FROM adult GROUP BY UPPER(sex);

-- title: first three letters of the country
-- schema: adult
-- expect: answered
SELECT SUBSTRING(native_country, 1, 3) AS prefix, COUNT(*) AS n
FROM adult
WHERE native_country IS NOT NULL
GROUP BY prefix
ORDER BY n DESC;

-- title: mean length of occupation names
-- schema: adult
-- expect: answered
SELECT AVG(LENGTH(occupation)) FROM adult;

-- title: married people with LIKE
-- schema: adult
-- expect: answered
SELECT COUNT(*) FROM adult WHERE marital_status LIKE 'Married%';

-- title: sales jobs with ILIKE
-- schema: adult
-- expect: answered
SELECT sex, COUNT(*) FROM adult WHERE occupation ILIKE '%sales%' GROUP BY sex;

-- title: trimmed workclass
-- schema: adult
-- expect: answered
SELECT TRIM(workclass) AS wc, COUNT(*) FROM adult GROUP BY TRIM(workclass);

-- title: sex and race label
-- schema: adult
-- expect: answered
SELECT sex || ' / ' || race AS grp, COUNT(*) AS n FROM adult GROUP BY 1 ORDER BY n DESC;

-- title: not self-employed
-- schema: adult
-- expect: answered
SELECT AVG(hours_per_week) FROM adult WHERE workclass NOT LIKE 'Self-emp%';

-- title: years of education as text
-- schema: adult
-- expect: answered
SELECT CAST(education_num AS VARCHAR) AS years, COUNT(*) FROM adult GROUP BY 1;

-- title: average age as a whole number
-- schema: adult
-- expect: answered
SELECT sex, CAST(AVG(age) AS INTEGER) AS avg_age FROM adult GROUP BY sex;

-- title: postgres cast syntax
-- schema: adult
-- expect: answered
SELECT SUM(hours_per_week::float) / COUNT(*) AS mean_hours FROM adult;

-- title: countries with a hyphen, strpos
-- schema: adult
-- expect: answered
SELECT COUNT(*) FROM adult WHERE STRPOS(native_country, '-') > 0;

-- title: marital status with spaces
-- schema: adult
-- expect: answered
SELECT REPLACE(marital_status, '-', ' ') AS status, COUNT(*) FROM adult GROUP BY 1;

-- title: first two letters of education, LEFT
-- schema: adult
-- expect: answered
SELECT LEFT(education, 2) AS e2, COUNT(*) FROM adult GROUP BY 1;

-- title: rank occupations by size
-- schema: adult
-- expect: answered
-- compare: none
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, and the window ranks them too, so ranks differ from the exact SQL's
SELECT occupation, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*) DESC) AS size_rank
FROM adult
WHERE occupation IS NOT NULL
GROUP BY occupation
ORDER BY size_rank;

-- title: share of each race
-- schema: adult
-- expect: answered
SELECT race, COUNT(*) * 1.0 / SUM(COUNT(*)) OVER () AS share FROM adult GROUP BY race;

-- title: share of capital gain by education
-- schema: adult
-- expect: answered
SELECT education, SUM(capital_gain) / SUM(SUM(capital_gain)) OVER () AS share_of_gains
FROM adult
GROUP BY education
ORDER BY share_of_gains DESC;

-- title: cumulative people by years of education
-- schema: adult
-- expect: answered
SELECT education_num, COUNT(*) AS n,
       SUM(COUNT(*)) OVER (ORDER BY education_num) AS cumulative
FROM adult
GROUP BY education_num
ORDER BY education_num;

-- title: change in high income rate from one education level to the next
-- schema: adult
-- expect: answered
SELECT education_num,
       AVG(CASE WHEN income_class = '>50K' THEN 1.0 ELSE 0.0 END) AS rate,
       AVG(CASE WHEN income_class = '>50K' THEN 1.0 ELSE 0.0 END)
         - LAG(AVG(CASE WHEN income_class = '>50K' THEN 1.0 ELSE 0.0 END))
             OVER (ORDER BY education_num) AS change
FROM adult
GROUP BY education_num;

-- title: top occupation within each sex
-- schema: adult
-- expect: answered
-- compare: none
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, and the window ranks them too, so ranks differ from the exact SQL's
SELECT sex, occupation, COUNT(*) AS n,
       RANK() OVER (PARTITION BY sex ORDER BY COUNT(*) DESC) AS rnk
FROM adult
WHERE occupation IS NOT NULL
GROUP BY sex, occupation
ORDER BY sex, rnk;

-- title: dense rank of workclasses by hours
-- schema: adult
-- expect: answered
-- compare: none
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, and the window ranks them too, so ranks differ from the exact SQL's
SELECT workclass, AVG(hours_per_week) AS h, DENSE_RANK() OVER (ORDER BY AVG(hours_per_week) DESC) AS r
FROM adult
WHERE workclass IS NOT NULL
GROUP BY workclass;

-- title: three longest working occupations
-- schema: adult
-- expect: answered
-- compare: none
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, and the window ranks them too, so ranks differ from the exact SQL's
SELECT occupation, AVG(hours_per_week) AS hours,
       ROW_NUMBER() OVER (ORDER BY AVG(hours_per_week) DESC) AS pos
FROM adult
WHERE occupation IS NOT NULL
GROUP BY occupation
ORDER BY pos
LIMIT 3;

-- title: each person's age against the overall mean
-- schema: adult
-- expect: 42501
-- reason: a window over the table's rows reads rows
SELECT age, AVG(age) OVER () AS mean_age FROM adult;

-- title: quartile of each education level by income rate
-- schema: adult
-- expect: answered
SELECT education, NTILE(4) OVER (ORDER BY AVG(CASE WHEN income_class = '>50K' THEN 1 ELSE 0 END)) AS quartile
FROM adult
GROUP BY education;
