"""Released answers as JSON text, for the answer cache: the same rows, types and error bounds
come back exactly (floats by their shortest repr, dates and decimals tagged)."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

from dpproxy.release.postprocess import OutputColumn, Released


def _encode(v: Any) -> Any:
    if isinstance(v, datetime.datetime):
        return {"$datetime": v.isoformat()}
    if isinstance(v, datetime.date):
        return {"$date": v.isoformat()}
    if isinstance(v, decimal.Decimal):
        return {"$decimal": str(v)}
    if isinstance(v, float) and v != v:
        return {"$float": "nan"}
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return {"$float": "inf" if v > 0 else "-inf"}
    return v


def _decode(v: Any) -> Any:
    if isinstance(v, dict):
        if "$datetime" in v:
            return datetime.datetime.fromisoformat(v["$datetime"])
        if "$date" in v:
            return datetime.date.fromisoformat(v["$date"])
        if "$decimal" in v:
            return decimal.Decimal(v["$decimal"])
        if "$float" in v:
            return float(v["$float"])
    return v


def encode_released(r: Released) -> str:
    return json.dumps(
        {
            "columns": [[c.name, c.type] for c in r.columns],
            "rows": [[_encode(v) for v in row] for row in r.rows],
            "errors": [[_encode(v) for v in row] for row in r.errors],
        },
        ensure_ascii=False,
    )


def decode_released(text: str) -> Released:
    d = json.loads(text)
    return Released(
        tuple(OutputColumn(n, t) for n, t in d["columns"]),
        tuple(tuple(_decode(v) for v in row) for row in d["rows"]),
        tuple(tuple(_decode(v) for v in row) for row in d["errors"]),
    )
