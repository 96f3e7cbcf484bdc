"""``server.JsonFormatter``, the server's log line (one per release): the time text is made
once a second (it was a strftime per line) and is still the record's own second; only the
named fields are written."""

from __future__ import annotations

import json
import logging
import time as clock

from dpproxy.server.server import JsonFormatter


def test_log_lines_keep_their_fields_and_time() -> None:
    """The JSON log line (one per release): the time text, made once a second, is the
    record's own second; only the named fields, as before."""
    formatter = JsonFormatter()
    extra = {"event": "release", "user": "ana", "rows": 2, "cost": "ε=1", "ms": 1.5, "pid": 7}
    records = []
    for created in (1_700_000_000.2, 1_700_000_000.9, 1_700_000_001.1, 1_700_000_000.5):
        record = logging.LogRecord("dpproxy.server", logging.INFO, "f", 1, "released", (), None)
        record.__dict__.update(extra, direct=True, secret="never logged")
        record.created = created
        records.append(json.loads(formatter.format(record)))
    for created, line in zip(
        (1_700_000_000, 1_700_000_000, 1_700_000_001, 1_700_000_000), records, strict=True
    ):
        assert line["time"] == clock.strftime("%Y-%m-%dT%H:%M:%S", clock.localtime(created))
        assert line == {
            "time": line["time"],
            "level": "info",
            "msg": "released",
            **extra,
            "direct": True,
        }
