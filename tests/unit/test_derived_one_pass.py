"""A COUNT read off a JOINT mean is planned in one pass (``choosing.derived_first``): the plan,
or the error, is the one the planner's two passes give (a plan at the weights, then one at the
split ``derived.split`` draws from it), which the tests get by turning the shortcut off."""

from __future__ import annotations

import itertools
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from dpproxy.catalog.model import MechanismKind, Neighbouring
from dpproxy.errors import DPProxyError
from dpproxy.planning import choosing, planner
from dpproxy.planning.methods import MethodOptions
from dpproxy.planning.plan import Method
from dpproxy.sql.parse import parse
from dpproxy.sql.validate import validate

QUERIES = (
    "SELECT COUNT(*), AVG(age) FROM adult",
    "SELECT AVG(age), COUNT(*) FROM adult",
    "SELECT COUNT(age), AVG(age) FROM adult",
    "SELECT COUNT(*), COUNT(age), AVG(age) FROM adult",
    "SELECT COUNT(*), AVG(age), AVG(hours_per_week) FROM adult",
    "SELECT COUNT(*), AVG(age), SUM(capital_gain) FROM adult",
    "SELECT COUNT(*), AVG(age), MEDIAN(age) FROM adult",
    "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex",
    "SELECT occupation, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY occupation "
    "HAVING COUNT(*) > 100 ORDER BY n DESC LIMIT 5",
    "SELECT age, COUNT(*), AVG(hours_per_week) FROM adult GROUP BY age",
    "SELECT COUNT(*), AVG(age) FROM adult WHERE sex = 'Female'",
    "SELECT COUNT(*) FILTER (WHERE age > 50), AVG(age) FROM adult",
    "SELECT COUNT(*), AVG(capital_gain * 1e300) FROM adult",
    "SELECT COUNT(*), AVG(DISTINCT age) FROM adult",
)
BUDGETS = (
    (None, None),
    (Fraction(1, 1000), None),
    (Fraction(50), None),
    (None, Fraction(0)),
    (Fraction(1, 10), Fraction(1, 10**12)),
)


def _outcome(plan: Any) -> str:
    try:
        return repr(plan())
    except DPProxyError as e:
        return f"{type(e).__name__} {e.sqlstate} {e.message!r} {e.hint!r}"


@pytest.mark.parametrize("relation", list(Neighbouring))
@pytest.mark.parametrize("mechanism", list(MechanismKind))
def test_one_pass_plan_is_the_two_passes_plan(
    demo_catalog: Any, relation: Neighbouring, mechanism: MechanismKind, monkeypatch: Any
) -> None:
    policy = replace(demo_catalog.policy, neighbouring=relation)
    methods = (None, Method.JOINT, Method.PTR, Method.SMOOTH)
    original = choosing.derived_first
    taken: list[bool] = []

    def counted(*args: Any) -> Any:
        out = original(*args)
        taken.append(out is not None)
        return out

    for sql, (eps, dlt), method in itertools.product(QUERIES, BUDGETS, methods):
        query = validate(parse(sql), demo_catalog, sql)
        opts = MethodOptions(method=method)

        def plan(query: Any = query, eps: Any = eps, dlt: Any = dlt, opts: Any = opts) -> Any:
            return planner.plan_query(
                query, policy, epsilon=eps, delta=dlt, mechanism=mechanism, options=opts
            )

        with monkeypatch.context() as m:
            m.setattr(planner, "derived_first", counted)
            one = _outcome(plan)
        with monkeypatch.context() as m:
            m.setattr(planner, "derived_first", lambda *args: None)
            two = _outcome(plan)
        assert one == two, (sql, eps, dlt, method)
    if mechanism is MechanismKind.LAPLACE:
        assert any(taken)  # the one pass is taken (a derived COUNT, or a better split) ...
        assert not all(taken)  # ... and not always
