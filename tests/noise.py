"""Test-only noise sources. They live under ``tests/`` on purpose and never in ``dpproxy/``:
a noise source that adds nothing must not be importable by production code.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


class NoNoise:
    """A :class:`dpproxy.mechanisms.noise.NoiseSource` that returns the exact values unchanged.

    With it, the engine's released values are the exact answers of the rewritten query, so a
    test can compare them with the original SQL run directly on the database.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, Fraction, bool]] = []

    def laplace(self, values: Sequence[float], scale: Fraction, *, integer: bool) -> list[float]:
        self.calls.append(("laplace", len(values), scale, integer))
        return [float(v) for v in values]

    def gaussian(self, values: Sequence[float], sigma: Fraction, *, integer: bool) -> list[float]:
        self.calls.append(("gaussian", len(values), sigma, integer))
        return [float(v) for v in values]

    def noisy_min_index(self, scores: Sequence[float], scale: Fraction) -> int:
        """The exact argmin (the first on ties): the exponential mechanism without noise."""
        self.calls.append(("select", len(scores), scale, True))
        return min(range(len(scores)), key=lambda i: scores[i])
