"""How a private query that failed after it read data is reported: one fixed error, charged.

Whether and how the database fails could depend on one person's row, and an error is not
noised; so the analyst sees :class:`PrivateQueryFailed` and nothing else (``Engine.run``), and
the cause goes to the operator's log only (:func:`log_failure`).
"""

from __future__ import annotations

import logging
from typing import ClassVar

from dpproxy.errors import DPProxyError, InternalError, QueryCanceled, StabilityTestFailed

log = logging.getLogger("dpproxy")
sidechannel_log = logging.getLogger("dpproxy.sidechannel")


class PrivateQueryFailed(InternalError):
    """A private query failed while it ran (XX000), charged.

    Whether and how the database fails could depend on one person's row (an overflow or a
    failed cast on a matching row), and an error is not noised. So every such failure looks
    the same to the analyst, on both engines, embedded and over the wire: this SQLSTATE and
    :data:`MESSAGE`, no detail, no hint, no position. The cause is logged for the operator
    only (:meth:`Engine.run`).
    """

    MESSAGE: ClassVar[str] = "the database failed to run a private query; the attempt was charged"

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


# Failures after the data was touched that reach the analyst unchanged (charged): a
# cancellation the analyst asked for or the statement timeout (57014), and propose-test-release's
# refusal (ZD005), which is the outcome of a DP test.
PASSED_ON: tuple[type[DPProxyError], ...] = (QueryCanceled, StabilityTestFailed)


def log_failure(error: Exception, analyst: str, query: str, plan: str) -> None:
    """The operator's record of a :class:`PrivateQueryFailed`: the cause (the backend's own
    message, which may quote a value: the operator's log is as confidential as the database),
    then a ``dpproxy.sidechannel`` record with no value in it."""
    if isinstance(error, DPProxyError):
        cause = f"{type(error).__name__} ({error.sqlstate}): {error.log_detail or error.message}"
    else:
        cause = f"{type(error).__name__}: {error}"
    log.error(
        "a private query of %s failed while it ran (charged): %s",
        analyst,
        cause,
        exc_info=None if isinstance(error, DPProxyError) else error,
        extra={"event": "failure", "user": analyst, "sqlstate": PrivateQueryFailed.sqlstate},
    )
    sidechannel_log.warning(
        "possible side channel: a private query failed while it ran; analyst %r, query %s, plan %s",
        analyst,
        query,
        plan,
        extra={
            "event": "sidechannel",
            "user": analyst,
            "sqlstate": PrivateQueryFailed.sqlstate,
            "query": query,
            "plan": plan,
        },
    )
