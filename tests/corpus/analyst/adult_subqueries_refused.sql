--- CTEs, subqueries and set operations over the Adult extract, and what must stay refused.

-- title: full-time workers by sex, through a CTE
-- schema: adult
-- expect: answered
WITH workers AS (SELECT * FROM adult WHERE hours_per_week >= 40)
SELECT sex, COUNT(*) AS n FROM workers GROUP BY sex;

-- title: age band defined in a CTE
-- schema: adult
-- expect: answered
WITH t AS (
  SELECT age, CASE WHEN age < 40 THEN 'younger' ELSE 'older' END AS band FROM adult
)
SELECT band, AVG(age) AS mean_age FROM t GROUP BY band;

-- title: filtered subquery in FROM
-- schema: adult
-- expect: answered
SELECT s.race, AVG(s.capital_gain) AS avg_gain
FROM (SELECT race, capital_gain FROM adult WHERE income_class = '>50K') AS s
GROUP BY s.race;

-- title: people older than the average age
-- schema: adult
-- expect: answered
SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult);

-- title: people with a capital gain, through IN
-- schema: adult
-- expect: answered
SELECT sex, COUNT(*)
FROM adult
WHERE person_id IN (SELECT person_id FROM adult WHERE capital_gain > 0)
GROUP BY sex;

-- title: people with a capital loss, through EXISTS
-- schema: adult
-- expect: answered
SELECT COUNT(*)
FROM adult a
WHERE EXISTS (SELECT 1 FROM adult b WHERE b.person_id = a.person_id AND b.capital_loss > 0);

-- title: people without a capital gain, through NOT IN
-- schema: adult
-- expect: answered
SELECT COUNT(*) FROM adult WHERE person_id NOT IN (SELECT person_id FROM adult WHERE capital_gain > 0);

-- title: average size of an occupation group
-- schema: adult
-- expect: answered
SELECT AVG(n) AS avg_group_size
FROM (SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation) t;

-- title: men and women as two rows with UNION ALL
-- schema: adult
-- expect: answered
SELECT 'male' AS grp, COUNT(*) AS n FROM adult WHERE sex = 'Male'
UNION ALL
SELECT 'female', COUNT(*) FROM adult WHERE sex = 'Female';

-- title: share of each sex with a scalar subquery
-- schema: adult
-- expect: answered
SELECT sex, COUNT(*) * 1.0 / (SELECT COUNT(*) FROM adult) AS share FROM adult GROUP BY sex;

-- title: occupations above average hours
-- schema: adult
-- expect: answered
WITH by_occ AS (
  SELECT occupation, AVG(hours_per_week) AS hours FROM adult GROUP BY occupation
)
SELECT occupation, hours FROM by_occ WHERE hours > (SELECT AVG(hours) FROM by_occ);

-- title: two CTEs, row-wise
-- schema: adult
-- expect: answered
-- compare: keys 1
-- groups of the public domain that the WHERE clause (or the data) leaves empty are
-- released zero-filled, so only rows whose first column (the group key) occurs
-- in the exact answer are compared
WITH adults AS (SELECT * FROM adult WHERE age >= 21),
     earners AS (SELECT * FROM adults WHERE income_class = '>50K')
SELECT education, COUNT(*) FROM earners GROUP BY education;

-- title: every row
-- schema: adult
-- expect: 42501
-- reason: a row-level read
SELECT * FROM adult LIMIT 10;

-- title: ages and sexes of big earners
-- schema: adult
-- expect: 42501
-- reason: a row-level read
SELECT age, sex FROM adult WHERE capital_gain > 50000;

-- title: count per person
-- schema: adult
-- expect: 42501
-- reason: grouping by the privacy unit
SELECT person_id, COUNT(*) FROM adult GROUP BY person_id;

-- title: list of occupations
-- schema: adult
-- expect: 42501
-- reason: DISTINCT without an aggregate reads rows
SELECT DISTINCT occupation FROM adult;

-- title: sum of ids
-- schema: adult
-- expect: ZD002
-- reason: the privacy unit has no bounds
SELECT SUM(person_id) FROM adult;

-- title: oldest person
-- schema: adult
-- expect: 42501
-- reason: LIMIT without aggregation is a row-level read
SELECT age FROM adult ORDER BY age DESC LIMIT 1;

-- title: delete rows
-- schema: adult
-- expect: 42501
-- reason: not a query
DELETE FROM adult WHERE age > 80;

-- title: most common occupation, MODE
-- schema: adult
-- expect: 0A000
-- reason: MODE
SELECT MODE() WITHIN GROUP (ORDER BY occupation) FROM adult;

-- title: random sample mean
-- schema: adult
-- expect: 0A000
-- reason: a non-deterministic function
SELECT AVG(age) FROM adult WHERE random() < 0.1;

-- title: self-join on the person
-- schema: adult
-- expect: 0A000
-- reason: a self-join of a private table
SELECT COUNT(*) FROM adult a JOIN adult b ON a.person_id = b.person_id;

-- title: server version
-- schema: adult
-- expect: 0A000
-- reason: a system function
SELECT version();

-- title: list of occupations per country
-- schema: adult
-- expect: 0A000
-- reason: STRING_AGG lists values
SELECT native_country, STRING_AGG(occupation, ',') FROM adult GROUP BY native_country;

-- title: mean of the group counts without a subquery
-- schema: adult
-- expect: 42803
-- reason: nested aggregates
SELECT AVG(COUNT(*)) FROM adult GROUP BY sex;

-- title: create a copy
-- schema: adult
-- expect: 42501
-- reason: not a query
CREATE TABLE adult_copy AS SELECT * FROM adult;

-- title: first five rows, lower case
-- schema: adult
-- expect: 42501
-- reason: a row-level read
select age, education, occupation from adult limit 5;

-- title: people of the same age, self-join
-- schema: adult
-- expect: 0A000
-- reason: a self-join of a private table
SELECT COUNT(*) FROM adult a JOIN adult b ON a.age = b.age;

-- title: men and women counted twice with UNION, duplicate released rows dropped
-- schema: adult
-- expect: answered
SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex
UNION
SELECT 'Male', COUNT(*) FROM adult WHERE sex = 'Male';

-- title: people who are both young and high earners, with INTERSECT
-- schema: adult
-- expect: 0A000
-- reason: INTERSECT of rows is not supported (only UNION and UNION ALL of aggregate queries)
SELECT person_id FROM adult WHERE age < 30
INTERSECT
SELECT person_id FROM adult WHERE income_class = '>50K';

-- title: mean age beside a head count, integer and double in one column
-- schema: adult
-- expect: 0A000
-- reason: a UNION column that is integer in one branch and double in another must be CAST
SELECT 'n' AS what, COUNT(*) AS v FROM adult
UNION ALL
SELECT 'mean age', AVG(age) FROM adult;
