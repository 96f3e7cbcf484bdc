"""docker/: the compose file's commands are real dpproxy commands wired to real services.

There is no Docker engine in the test environment, so nothing is built or started here. What is
checked instead: every ``command`` of a service that runs the dpproxy image parses with the
real click CLI (an unknown command or option, or a missing argument, fails the test); its
PostgreSQL URL names a service of the file, on the port that service listens on, with the
user, password and database that service creates; ``depends_on`` names existing services in
an order that works; a ``--schema`` path exists in the image; and the Dockerfile is slim and
non-root.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from dpproxy.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


# ------------------------------------------------------------------------------ Dockerfile


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's ``(INSTRUCTION, arguments)``, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


INSTRUCTIONS = _instructions()


def _all(word: str) -> list[str]:
    return [rest for w, rest in INSTRUCTIONS if w == word]


def test_dockerfile_is_slim_and_runs_as_a_non_root_user() -> None:
    (base,) = _all("FROM")
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base), base
    users = _all("USER")
    assert users, "the image must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    # the user is created in the image, and the last USER comes after every RUN
    assert any(re.search(rf"\buseradd\b.*\b{re.escape(user)}$", r) for r in _all("RUN"))
    last_user = max(i for i, (w, _) in enumerate(INSTRUCTIONS) if w == "USER")
    last_run = max(i for i, (w, _) in enumerate(INSTRUCTIONS) if w == "RUN")
    assert last_run < last_user


def test_dockerfile_installs_the_project_and_runs_dpproxy() -> None:
    installs = [r for r in _all("RUN") if "pip install" in r]
    assert len(installs) == 1
    words = shlex.split(installs[0])
    assert "--no-cache-dir" in words and "." in words
    # demo load (and the PostgreSQL backend) need psycopg: a dependency, or installed beside
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *words]
    assert any(re.match(r"psycopg(\[binary\])?\b(?!-)", r) for r in requirements)
    (entrypoint,) = _all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["dpproxy"]


def test_dockerfile_copies_only_what_exists() -> None:
    for rest in _all("COPY"):
        *sources, _dest = shlex.split(rest)
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"


def _image_path(path: str) -> Path:
    """The repository file that the Dockerfile copies to ``path`` in the image.

    Follows WORKDIR and ``COPY src dest`` (dest relative to WORKDIR); fails if nothing is
    copied there.
    """
    workdir = PurePosixPath("/")
    target = PurePosixPath(path)
    found: Path | None = None
    for word, rest in INSTRUCTIONS:
        if word == "WORKDIR":
            workdir = workdir / rest
        elif word == "COPY":
            *sources, dest = shlex.split(rest)
            where = workdir / dest
            for source in sources:
                into = where / PurePosixPath(source).name if dest.endswith("/") else where
                if target == into or into in target.parents:
                    found = REPO / source / target.relative_to(into)
    assert found is not None, f"the Dockerfile copies nothing to {path}"
    return found


# ------------------------------------------------------------------------------ services


def _builds_our_dockerfile(service: dict[str, Any]) -> bool:
    build = service.get("build")
    if build is None:
        return False
    if isinstance(build, str):
        context, dockerfile = build, "Dockerfile"
    else:
        context, dockerfile = build.get("context", "."), build.get("dockerfile", "Dockerfile")
    return (DOCKER / context / dockerfile).resolve() == DOCKERFILE.resolve()


def _runs_dpproxy(service: dict[str, Any]) -> bool:
    image = str(service.get("image", ""))
    return _builds_our_dockerfile(service) or image.split(":")[0].split("/")[-1] == "dpproxy"


DPPROXY_SERVICES = sorted(name for name, s in SERVICES.items() if _runs_dpproxy(s))


def test_the_compose_file_has_the_expected_services() -> None:
    assert {"postgres", "demo-load", "dpproxy"} <= set(SERVICES)
    assert DPPROXY_SERVICES == ["demo-load", "dpproxy"]
    assert SERVICES["postgres"]["image"].split(":")[0] == "postgres"


@pytest.mark.parametrize("name", DPPROXY_SERVICES)
def test_dpproxy_services_build_the_image_and_keep_its_entrypoint(name: str) -> None:
    service = SERVICES[name]
    assert _builds_our_dockerfile(service), f"{name}: build must use docker/Dockerfile"
    assert service.get("entrypoint") in (None, ["dpproxy"]), name


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    """``depends_on`` as ``{service: condition}`` (the list form means service_started)."""
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {k: (v or {}).get("condition", "service_started") for k, v in deps.items()}


def _requires(name: str) -> Iterator[str]:
    """Every service ``name`` waits for, directly or not."""
    for dep in _depends_on(SERVICES[name]):
        yield dep
        yield from _requires(dep)


def test_depends_on_names_existing_services_without_cycles() -> None:
    for name, service in SERVICES.items():
        for dep in _depends_on(service):
            assert dep in SERVICES, f"{name} depends on {dep}, which is not a service"
        assert name not in set(_requires(name)), f"{name} depends on itself"


def test_startup_order() -> None:
    assert "pg_isready" in " ".join(map(str, SERVICES["postgres"]["healthcheck"]["test"]))
    assert _depends_on(SERVICES["demo-load"]) == {"postgres": "service_healthy"}
    assert _depends_on(SERVICES["dpproxy"]) == {"demo-load": "service_completed_successfully"}


# ------------------------------------------------------------------------------ commands


def _leaf_commands(group: click.Group = main) -> Iterator[click.Command]:
    for cmd in group.commands.values():
        if isinstance(cmd, click.Group):
            yield from _leaf_commands(cmd)
        else:
            yield cmd


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse ``dpproxy ARGV`` with the real CLI, without running anything.

    Every command's body is replaced by a recorder, and the CLI is run exactly as the console
    script runs it: unknown commands or options, missing arguments and bad choices raise
    ``click.UsageError``. Returns the command path (``"demo load"``) and its parameters.
    """
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(**params: Any) -> None:
        ctx = click.get_current_context()
        calls.append((ctx.command_path.removeprefix("dpproxy").strip(), params))

    with pytest.MonkeyPatch.context() as mp:
        for cmd in _leaf_commands():
            mp.setattr(cmd, "callback", record)
        main.main(args=list(argv), prog_name="dpproxy", standalone_mode=False)
    assert len(calls) == 1, f"dpproxy {shlex.join(argv)} ran no command"
    return calls[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "lod", "--database", "postgresql://x@y/z"],  # unknown subcommand
        ["serve", "--port", "6432"],  # a command that does not exist (yet)
        ["demo", "load", "--databse", "postgresql://x@y/z"],  # unknown option
        ["demo", "load"],  # missing required option
        ["query"],  # missing SQL
        ["query", "--mechanism", "cauchy", "SELECT COUNT(*) FROM adult"],  # bad choice
        ["query", "SELECT 1", "extra"],  # extra argument
    ],
)
def test_parse_rejects_what_the_cli_rejects(argv: list[str]) -> None:
    with pytest.raises(click.UsageError):
        parse(argv)


def test_parse_returns_the_command_and_its_parameters() -> None:
    path, params = parse(["demo", "load", "-d", "postgresql://a@b/c", "--replace"])
    assert path == "demo load"
    assert params == {"database": "postgresql://a@b/c", "table": "adult", "replace": True}
    with pytest.raises(AssertionError, match="ran no command"):
        parse(["demo", "load", "--help"])


def _command(name: str) -> list[str]:
    command = SERVICES[name].get("command")
    assert isinstance(command, list) and all(isinstance(w, str) for w in command), (
        f"{name}: write command in list form, each word a string"
    )
    return command


@pytest.mark.parametrize("name", DPPROXY_SERVICES)
def test_each_command_parses_with_the_real_cli(name: str) -> None:
    path, params = parse(_command(name))
    assert path in {"demo load", "query", "explain"}, f"{name}: unexpected command {path}"
    assert params.get("database"), f"{name}: give --database explicitly"


def _listen_port(service: dict[str, Any]) -> int:
    """The port the postgres service listens on: ``-p N``, ``-c port=N``, PGPORT, or 5432."""
    command = service.get("command") or []
    words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
    for i, word in enumerate(words):
        if word == "-p" and i + 1 < len(words):
            return int(words[i + 1])
        if match := re.fullmatch(r"port=(\d+)", word):
            return int(match.group(1))
    return int(_environment(service).get("PGPORT", 5432))


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


@pytest.mark.parametrize("name", DPPROXY_SERVICES)
def test_the_database_url_points_at_the_postgres_service(name: str) -> None:
    _, params = parse(_command(name))
    url = urlsplit(params["database"])
    assert url.scheme in ("postgresql", "postgres"), params["database"]
    assert url.hostname in SERVICES, f"{name}: host {url.hostname} is not a service"
    server = SERVICES[url.hostname]
    assert url.port == _listen_port(server) == 5432
    assert url.hostname in set(_requires(name)), f"{name} must wait for {url.hostname}"
    env = _environment(server)
    user = env.get("POSTGRES_USER", "postgres")
    assert url.username == user
    assert url.password == env["POSTGRES_PASSWORD"]
    assert url.path == "/" + env.get("POSTGRES_DB", user)
    healthcheck = " ".join(map(str, server["healthcheck"]["test"]))
    assert f"-U {user}" in healthcheck and f"-d {url.path[1:]}" in healthcheck


def test_the_load_and_the_query_use_the_same_table_and_database() -> None:
    _, load = parse(_command("demo-load"))
    _, query = parse(_command("dpproxy"))
    assert load["database"] == query["database"]
    assert load["replace"] is True  # `docker compose up` may run demo-load again
    schema = yaml.safe_load(_image_path(query["schema"]).read_text(encoding="utf-8"))
    assert load["table"] in schema["tables"]
    assert re.search(rf"\bFROM\s+{re.escape(load['table'])}\b", query["sql"], re.I)


def test_the_schema_path_exists_in_the_image() -> None:
    _, query = parse(_command("dpproxy"))
    path = _image_path(query["schema"])
    assert path == REPO / "schemas" / "adult.yaml"
    assert path.is_file()
