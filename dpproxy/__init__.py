"""dpproxy: ordinary SQL in, differentially private answers out."""

from __future__ import annotations

from dpproxy.errors import DPProxyError

__version__ = "0.1.0"

__all__ = ["DPProxyError", "__version__", "connect"]


def __getattr__(name: str) -> object:
    if name == "connect":
        from dpproxy.dbapi import connect

        return connect
    raise AttributeError(name)
