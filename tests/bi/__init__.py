"""Browser tests of BI tools: a package, so that its conftest.py does not collide with
tests/conftest.py when the whole suite is collected."""
