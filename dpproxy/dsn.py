"""PostgreSQL connection strings: recognising them and showing them without a password."""

from __future__ import annotations

import re
from urllib.parse import unquote

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_KEYWORD_PASSWORD = re.compile(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)\s*")


SPARK_SCHEMES = ("spark+local", "spark://", "sc://")


def is_spark_url(database: str) -> bool:
    """Whether ``database`` names a Spark session (``backends/spark.py``): ``spark+local[N]``,
    ``spark://HOST:PORT`` or ``sc://HOST:PORT`` (Spark Connect)."""
    return database.lower().startswith(SPARK_SCHEMES)


def is_postgres_url(dsn: str) -> bool:
    """Whether ``dsn`` is a PostgreSQL URL (``postgresql://…`` or ``postgres://…``)."""
    return dsn.lower().startswith(POSTGRES_SCHEMES)


def redact_dsn(dsn: str) -> str:
    """The URL (or key=value string) ``dsn`` without its password, for messages and logs.

    The user information is found as libpq finds it (up to the first ``@`` before any ``/``),
    so whatever libpq would send as the password is what is removed, also from a
    ``password=`` query parameter.

    >>> redact_dsn("postgresql://ana:s3cret@db.example:5432/demo?sslmode=require&password=x")
    'postgresql://ana@db.example:5432/demo?sslmode=require'
    >>> redact_dsn("postgres://db.example/demo")
    'postgres://db.example/demo'
    >>> redact_dsn("host=db user=ana password='a b' dbname=demo")
    'host=db user=ana dbname=demo'
    """
    scheme, sep, rest = dsn.partition("://")
    if not sep:  # a libpq key=value string
        return _KEYWORD_PASSWORD.sub("", dsn).strip()
    end = next((i for i, c in enumerate(rest) if c in "@/"), len(rest))
    prefix = ""
    if end < len(rest) and rest[end] == "@":
        user = rest[:end].partition(":")[0]
        prefix = f"{user}@" if user else ""
        rest = rest[end + 1 :]
    base, _, query = rest.partition("?")
    kept = [p for p in query.split("&") if p and unquote(p.partition("=")[0]) != "password"]
    return f"{scheme}://{prefix}{base}" + ("?" + "&".join(kept) if kept else "")
