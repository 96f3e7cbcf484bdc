"""Answer client introspection (``pg_catalog``, ``information_schema``, SHOW/SET) without data.

Clients introspect on connect and while browsing: psql's ``\\d``, SQLAlchemy's inspector,
pgJDBC's ``DatabaseMetaData``, asyncpg's type introspection, ``SELECT version()``. A
:class:`CatalogEmulator` answers these from the privacy schema (a
:class:`~dpproxy.catalog.model.Catalog`) alone, PostgreSQL 15 style, in a private in-memory
DuckDB database.

Why nothing about the data can leak (the no-leak argument):

1. *Nothing data-dependent goes in.* The emulation database is built by :func:`~.model.build_model`
   from the ``Catalog`` (names, column types, nullability from the schema file), the server
   identity given to the constructor and fixed PostgreSQL 15 constants. The emulator takes
   no backend, no connection and no statistics; it cannot reach the data because it is never
   given a way to. Schema tables are *not* created in the emulation database at all: a query
   that reads one is refused (0A000) instead of getting an empty, plausible-looking answer.
2. *Every data-dependent catalog field is a constant.* ``pg_class.reltuples`` is -1 (never
   analysed) and ``relpages``/``relallvisible`` 0 for every relation; ``pg_stats``,
   ``pg_statistic``, ``pg_stat_user_tables`` and ``pg_stat_all_tables`` exist and are empty;
   ``pg_table_size``, ``pg_relation_size``, ``pg_total_relation_size``, ``pg_indexes_size``
   and ``pg_database_size`` return NULL; there are no sample values anywhere (``pg_stats``'s
   ``most_common_vals``/``histogram_bounds`` have no rows). So the answers are a pure
   function of the schema: two datasets with the same schema get identical answers.
3. *Only catalog SQL runs, and only inside the emulation database.*
   :meth:`CatalogEmulator.is_catalog_query` (:func:`.validate.check`) accepts a statement
   only if every relation it names is an emulated ``pg_catalog`` / ``information_schema``
   relation (or a CTE of its own) and every function is on an allowlist (:mod:`.functions`);
   ``SELECT ... INTO``, locking clauses, DML and DDL are refused. The DuckDB connection runs
   with external access (files, HTTP, extensions) disabled and its configuration locked, so
   even an allowlisted function cannot read a file. (A costly query, e.g. a huge
   ``generate_series``, is a denial of service, not a leak: the session cancels it with
   :meth:`CatalogEmulator.interrupt`.)
4. *Errors never carry DuckDB text.* Failures become dpproxy errors with PostgreSQL
   SQLSTATEs and messages built from the client's own identifiers; the DuckDB message goes to
   ``log_detail`` only.

The SQL clients send is PostgreSQL; it is parsed with sqlglot, rewritten (relations to the
emulation schemas ``pgc``/``pgis``, ``::regclass``-style casts resolved against the emulated
catalog, ``OPERATOR(pg_catalog.~)``, ``COLLATE``, session constants such as ``version()``
inlined, emulated functions to DuckDB macros) and run as DuckDB SQL.

Cost: the database of a schema is built once per process (≈ 0.15 s) and shared; each session
gets its own DuckDB cursor with TEMP tables for what is per session (settings, the user), ≈ 10
ms. Parsed statements and translations are cached, since clients send the same introspection
text on every connection.

The package, from the bottom up (each module imports only those above it):

- :mod:`.pgconst`: PostgreSQL 15 OIDs, the built-in types, PostgreSQL → DuckDB type names;
- :mod:`.relations`: the ``pg_catalog`` / ``information_schema`` relations, as spec text;
- :mod:`.functions`: the functions and operators a catalog query may call, and the macros;
- :mod:`.model`: every catalog row as Python values, a pure function of the schema;
- :mod:`.session_tables`: the per-session TEMP tables (roles, settings, open cursors);
- :mod:`.database`: the shared, locked-down DuckDB database and its error translation;
- :mod:`.settings`: setting defaults and the SHOW/SET/RESET syntax;
- :mod:`.cache`: the LRU cache of parsed statements and translations;
- :mod:`.nodes`: helpers over sqlglot nodes;
- :mod:`.validate`: the parse and the check that a statement is a catalog query;
- :mod:`.columns`: PostgreSQL's names and type OIDs for the result columns;
- :mod:`.rewrite`: PostgreSQL catalog SQL → DuckDB SQL over the emulation schemas;
- :mod:`.emulator`: :class:`CatalogEmulator`, the facade a session uses.
"""

from dpproxy.server.catalog.emulator import CatalogEmulator, Result

__all__ = ["CatalogEmulator", "Result"]
