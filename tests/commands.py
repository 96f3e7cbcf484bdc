"""How tests run the ``dpproxy`` command as a user would: the installed console script."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def dpproxy_command() -> list[str]:
    """The installed console script, else ``python -m dpproxy``."""
    found = shutil.which("dpproxy")
    if found is None:
        beside = Path(sys.executable).parent / "dpproxy"
        found = str(beside) if beside.is_file() else None
    return [found] if found else [sys.executable, "-m", "dpproxy"]
