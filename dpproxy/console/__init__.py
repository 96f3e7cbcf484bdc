"""The steward console (``dpproxy console``): budgets, releases and error bars on a web page.

``app.py`` is the Starlette application (login, CSRF, pages, JSON API), ``views.py`` the data
it shows (read from the ledger and the schema, never from the database), ``svg.py`` the
charts, ``command.py`` the CLI command that serves it with uvicorn.
"""
