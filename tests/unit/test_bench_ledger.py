"""docs/privacy.md quotes the committed run of ``benchmarks/bench_ledger.py``
(``benchmarks/LEDGER.md``): the ledger's rate and time per reserve + commit, the query end to
end with and without it, a cache hit, and the same ledger with durable reservations."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _rows() -> dict[str, list[str]]:
    text = (REPO / "benchmarks" / "LEDGER.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("memory", "ledger", "ledger, durable reservations"):
            rows[cells[0]] = cells[1:]
    assert set(rows) == {"memory", "ledger", "ledger, durable reservations"}
    return rows


def _ms(cell: str) -> str:
    return cell.removesuffix(" ms")


def _op_ms(cell: str) -> str:
    """``573 µs (942 µs)`` → ``0.57`` (ms, as the docs write it)."""
    us = re.match(r"(\d+) µs", cell)
    assert us is not None, cell
    return f"{int(us.group(1)) / 1000:.2f}"


def test_privacy_doc_quotes_the_ledger_run() -> None:
    doc = " ".join((REPO / "docs" / "privacy.md").read_text(encoding="utf-8").split())
    rows = _rows()
    memory, ledger, durable = rows["memory"], rows["ledger"], rows["ledger, durable reservations"]
    assert (
        f"a reserve + commit takes {_op_ms(ledger[2])} ms ({ledger[0]} from 1 thread, "
        f"{ledger[1]} from 8:" in doc
    )
    assert f"against {memory[2].split(' ')[0]} µs in memory" in doc
    assert (
        f"a demo COUNT query end to end {_ms(ledger[3])} ms with the ledger against "
        f"{_ms(memory[3])} ms without; a query answered from the cache {_ms(ledger[4])} ms" in doc
    )
    assert f"it cost {_op_ms(durable[2])} ms ({durable[0]}) and {_ms(durable[3])} ms a query" in doc
    # one fsync a query is what the faster ledger measures against the durable one
    assert float(ledger[0].rstrip("/s").replace(",", "")) > float(
        durable[0].rstrip("/s").replace(",", "")
    )
