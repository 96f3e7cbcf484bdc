"""dpproxy: ordinary SQL in, differentially private answers out."""

from __future__ import annotations

import logging

from dpproxy.errors import DPProxyError

# A library leaves its log's destination to the application (``dpproxy serve`` logs to stderr,
# ``dpproxy query --log FILE`` to a file). Without this handler, Python would print dpproxy's
# warnings and errors to stderr, where a failed query's cause — which can quote a value of the
# database — would reach whoever reads the program's output.
logging.getLogger("dpproxy").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = ["DPProxyError", "__version__", "connect"]


def __getattr__(name: str) -> object:
    if name == "connect":
        from dpproxy.dbapi import connect

        return connect
    raise AttributeError(name)
