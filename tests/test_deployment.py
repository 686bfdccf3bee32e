"""The container files: Dockerfile, .dockerignore and docker-compose.yml.

There is no Docker daemon here, so these tests check what can be checked without
one. Every compose service's environment, on top of the image's, passes the
broker's own validation (BrokerConfig), and the cluster's wiring agrees with
itself: node ids, voters, advertised and published ports, volumes, healthchecks,
profiles. The Dockerfile's own `python -m venv` and `pip install` commands run on
a copy of the build context filtered as .dockerignore filters it, and the
installed `kbroker` starts with the image's settings and passes the image's
HEALTHCHECK. That install fetches the dependencies from the package registry.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbroker.config import BrokerConfig, ConfigError

REPOSITORY = Path(__file__).resolve().parent.parent
DOCKERFILE = REPOSITORY / "Dockerfile"
DOCKERIGNORE = REPOSITORY / ".dockerignore"
COMPOSE_FILE = REPOSITORY / "docker-compose.yml"
DATA_VOLUME = "/var/lib/kbroker"
CONTROLLER_PORT = 9093
METRICS_PORT = 9308
SINGLE_PROFILE = "single"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
ROOT_USERS = ("", "root", "0")
INSTALL_TIMEOUT_S = 45  # venv and pip install together
TEST_TIMEOUT_S = 60


# --- reading a Dockerfile ---

@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: RUN, COPY, ...
    arguments: str  # the rest of the logical line, continuations joined


def read_instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, with backslash continuations joined and comments dropped."""
    instructions, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment lines inside a continuation too
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, f"the Dockerfile ends inside a continued line: {pending!r}"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """The build stages, each from its FROM on."""
    result = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        assert result, f"{instruction.keyword} before the first FROM"
        result[-1].append(instruction)
    return result


def exec_form(arguments: str) -> list[str]:
    assert arguments.startswith("["), f"expected the exec (JSON) form, got {arguments!r}"
    return json.loads(arguments)


def stage_environment(stage: list[Instruction], base: dict[str, str]) -> dict[str, str]:
    """``base`` with the stage's ENV instructions applied in order ($NAME and ${NAME} expanded)."""
    environment = dict(base)

    def expanded(value: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda match: environment.get(match.group(1), ""), value)

    for instruction in stage:
        if instruction.keyword != "ENV":
            continue
        tokens = shlex.split(instruction.arguments)
        if "=" not in tokens[0]:  # the legacy form: ENV NAME value with spaces
            environment[tokens[0]] = expanded(" ".join(tokens[1:]))
            continue
        updates = {}
        for token in tokens:
            name, equals, value = token.partition("=")
            assert equals, f"ENV {instruction.arguments!r}: {token!r} is not NAME=value"
            updates[name] = expanded(value)
        environment.update(updates)  # one ENV's values see the environment before it
    return environment


def last_argument(stage: list[Instruction], keyword: str) -> str | None:
    found = [instruction.arguments for instruction in stage if instruction.keyword == keyword]
    return found[-1] if found else None


def healthcheck_command(arguments: str) -> tuple[list[str], float]:
    """A HEALTHCHECK's command (exec form) and its --timeout in seconds."""
    options, cmd, command = arguments.partition("CMD ")
    assert cmd, f"HEALTHCHECK {arguments!r} has no CMD"
    timeout = re.search(r"--timeout=(\d+)s", options)
    return exec_form(command.strip()), float(timeout.group(1)) if timeout else 30.0


def python_code(command: list[str]) -> str | None:
    """The program of a ``python -c CODE`` command, else None."""
    if len(command) >= 3 and Path(command[0]).name.startswith("python") and command[1] == "-c":
        return command[2]
    return None


@pytest.fixture(scope="module")
def dockerfile() -> list[list[Instruction]]:
    return stages(read_instructions(DOCKERFILE.read_text()))


@pytest.fixture(scope="module")
def image_environment(dockerfile) -> dict[str, str]:
    """What the final stage's ENV instructions set."""
    return stage_environment(dockerfile[-1], {})


# --- reading .dockerignore as Docker does ---

def dockerignore_rules(text: str) -> list[tuple[bool, re.Pattern]]:
    """(excludes, pattern) per line; Docker's rules: root-relative, ``**`` any depth, the last match wins."""
    rules = []
    for line in text.splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        excludes = not pattern.startswith("!")
        pattern = posixpath.normpath(pattern.lstrip("!").strip()).lstrip("/")
        rules.append((excludes, re.compile(_pattern_regex(pattern))))
    return rules


def _pattern_regex(pattern: str) -> str:
    regex, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            regex.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            regex.append(".*")
            index += 2
        elif pattern[index] == "*":
            regex.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            regex.append("[^/]")
            index += 1
        elif pattern[index] == "[" and "]" in pattern[index:]:
            end = pattern.index("]", index)
            regex.append(pattern[index:end + 1].replace("\\", "\\\\"))
            index = end + 1
        else:
            regex.append(re.escape(pattern[index]))
            index += 1
    return "".join(regex)


def is_ignored(path: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Whether the context path (relative, with /) is left out; a left-out directory leaves out its contents."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:count]) for count in range(1, len(parts) + 1)]
    ignored = False
    for excludes, regex in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = excludes
    return ignored


def copy_build_context(destination: Path) -> None:
    """The repository as `docker build .` would send it: without what .dockerignore leaves out."""
    rules = dockerignore_rules(DOCKERIGNORE.read_text())
    can_prune = all(excludes for excludes, _ in rules)  # a "!" exception may reach inside an ignored directory
    for directory, subdirectories, files in os.walk(REPOSITORY):
        relative = Path(directory).relative_to(REPOSITORY).as_posix()
        prefix = "" if relative == "." else relative + "/"
        if can_prune:
            subdirectories[:] = [name for name in subdirectories if not is_ignored(prefix + name, rules)]
        for name in files:
            source = Path(directory) / name
            if not is_ignored(prefix + name, rules) and source.is_file():
                target = destination / (prefix + name)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


# --- reading docker-compose.yml ---

@pytest.fixture(scope="module")
def compose() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads docker-compose.yml: pyyaml belongs in the test extras")
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def compose_text(value) -> str:
    """An environment value as Compose passes it to the container."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def service_environment(service: dict) -> dict[str, str]:
    """The service's own variables (those passed through from the host, without a value, left out)."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment if "=" in item)
    return {name: compose_text(value) for name, value in environment.items() if value is not None}


@pytest.fixture(scope="module")
def configs(services, image_environment) -> dict[str, BrokerConfig]:
    """Each service's settings as its container sees them: the image's ENV, then the service's environment."""
    result = {}
    for name, service in services.items():
        environment = {**image_environment, **service_environment(service)}
        try:
            result[name] = BrokerConfig.load(environ=environment)
        except ConfigError as error:
            pytest.fail(f"service {name}: {error}")
    return result


@pytest.fixture(scope="module")
def cluster(configs) -> dict[str, BrokerConfig]:
    """The services that are members of a metadata quorum (not embedded single-node clusters)."""
    return {name: config for name, config in configs.items() if not config.is_embedded_quorum}


def hostnames(name: str, service: dict) -> set[str]:
    """The names other containers of the compose network reach the service by."""
    names = {name, service.get("hostname"), service.get("container_name")}
    networks = service.get("networks")
    for network in networks.values() if isinstance(networks, dict) else ():
        names.update((network or {}).get("aliases", ()))
    return {item for item in names if item}


def published_ports(service: dict) -> dict[int, int]:
    """Host port -> container port of the service's TCP port mappings."""
    published = {}
    for entry in service.get("ports") or ():
        if isinstance(entry, dict):
            if entry.get("protocol", "tcp") == "tcp" and entry.get("published"):
                published[int(entry["published"])] = int(entry["target"])
            continue
        mapping, _, protocol = str(entry).partition("/")
        fields = mapping.rsplit(":", 2)
        if protocol in ("", "tcp") and len(fields) >= 2:
            assert "-" not in mapping, f"write port ranges out one by one: {entry!r}"
            published[int(fields[-2])] = int(fields[-1])
    return published


def volume_mounts(service: dict) -> dict[str, str]:
    """Container path -> source of the service's volume mounts."""
    mounts = {}
    for entry in service.get("volumes") or ():
        if isinstance(entry, dict):
            mounts[entry["target"]] = entry.get("source", "")
        else:
            source, _, rest = str(entry).partition(":")
            target = rest.split(":")[0] if rest else source
            mounts[target] = source if rest else ""
    return mounts


# --- docker-compose.yml ---

def test_every_service_passes_the_broker_validation(configs, services):
    assert set(configs) == set(services) and configs
    for name, service in services.items():
        unknown = [variable for variable in service_environment(service) if not variable.startswith("KBROKER_")]
        assert not unknown, f"service {name}: variables the broker does not read: {unknown}"


def test_cluster_nodes_have_distinct_ids_and_are_exactly_the_voters(cluster, services):
    assert len(cluster) >= 3 and len(cluster) % 2 == 1, f"a quorum wants an odd number of voters: {sorted(cluster)}"
    node_ids = {name: config.node_id for name, config in cluster.items()}
    assert len(set(node_ids.values())) == len(node_ids), f"node ids repeat: {node_ids}"
    for name, config in cluster.items():
        assert set(config.process_roles) == {"broker", "controller"}, f"{name}: {config.process_roles}"
        (controller,) = config.controller_endpoints
        assert controller.port == CONTROLLER_PORT, f"{name}: controller listener {controller}"
    for name, config in cluster.items():
        voters = {voter.node_id: voter for voter in config.quorum_voters}
        assert set(voters) == set(node_ids.values()), f"{name}: voters {sorted(voters)}, nodes {node_ids}"
        for member, member_config in cluster.items():
            voter = voters[member_config.node_id]
            assert voter.host in hostnames(member, services[member]), f"{name}: voter {voter} names no {member}"
            assert voter.port == member_config.controller_endpoints[0].port, f"{name}: voter {voter} vs {member}"


def test_cluster_replication_survives_one_node_down(cluster):
    for name, config in cluster.items():
        nodes = len(cluster)
        for setting in ("default.replication.factor", "offsets.topic.replication.factor",
                        "transaction.state.log.replication.factor"):
            assert config.get(setting) == nodes, f"{name}: {setting}={config.get(setting)} with {nodes} nodes"
        assert 1 < config.min_insync_replicas < nodes, f"{name}: min.insync.replicas={config.min_insync_replicas}"
        assert config.get("inter.broker.listener.name") == "PLAINTEXT", name


def test_advertised_listeners_are_reachable_where_they_are_advertised(configs, services):
    host_ports = {}  # advertised to the host -> service
    for name, config in configs.items():
        service = services[name]
        published = published_ports(service)
        container_ports = {endpoint.listener_name: endpoint.port for endpoint in config.listener_endpoints}
        for endpoint in config.advertised_broker_endpoints:
            container_port = container_ports[endpoint.listener_name]
            if endpoint.host in LOCAL_HOSTS:
                assert published.get(endpoint.port) == container_port, (
                    f"{name}: {endpoint.listener_name} is advertised as {endpoint.host}:{endpoint.port} but host "
                    f"port {endpoint.port} is not published to its container port {container_port}: {published}")
                assert endpoint.port not in host_ports, f"{name} and {host_ports[endpoint.port]} share {endpoint.port}"
                host_ports[endpoint.port] = name
            else:
                assert endpoint.host in hostnames(name, service), f"{name}: advertises {endpoint}"
                assert endpoint.port == container_port, f"{name}: advertises {endpoint}, listens on {container_port}"
        if not config.is_embedded_quorum:
            inter_broker = config.get("inter.broker.listener.name")
            (advertised,) = [e for e in config.advertised_broker_endpoints if e.listener_name == inter_broker]
            assert advertised.host in hostnames(name, service), f"{name}: other brokers cannot reach {advertised}"
    every_published = [port for service in services.values() for port in published_ports(service)]
    assert len(every_published) == len(set(every_published)), f"host ports repeat: {sorted(every_published)}"


def test_each_node_has_its_own_volume_at_its_log_dirs(configs, services, compose):
    declared = set(compose.get("volumes") or {})
    owners = {}  # volume -> service
    for name, config in configs.items():
        mounts = volume_mounts(services[name])
        for directory in {*config.get("log.dirs"), config.get("metadata.log.dir")}:
            assert directory in mounts, f"{name}: {directory} is not a mounted volume: {mounts}"
            volume = mounts[directory]
            assert volume in declared, f"{name}: {directory} is on {volume!r}, not a named volume of {declared}"
            assert owners.setdefault(volume, name) == name, f"{name} and {owners[volume]} share volume {volume}"


def test_every_service_has_a_healthcheck_on_its_own_ports(configs, services):
    for name, config in configs.items():
        healthcheck = services[name].get("healthcheck") or {}
        command = healthcheck.get("test")
        assert command and not healthcheck.get("disable") and command[0] in ("CMD", "CMD-SHELL"), f"{name}: {command}"
        code = python_code(command[1:]) if command[0] == "CMD" else None
        if code is not None:
            compile(code, f"<{name} healthcheck>", "exec")
            ports = {str(config.metrics_port), str(config.client_endpoint.port)}
            assert any(port in code for port in ports) or "KBROKER_METRICS_PORT" in code, f"{name}: {code}"


def test_the_single_node_service_starts_only_in_its_profile(configs, services, cluster):
    single = [name for name, service in services.items() if SINGLE_PROFILE in (service.get("profiles") or ())]
    assert single == ["kbroker"], f"services in profile {SINGLE_PROFILE}: {single}"
    config = configs["kbroker"]
    assert config.is_embedded_quorum and set(config.process_roles) == {"broker", "controller"}
    assert published_ports(services["kbroker"]).get(9092) == config.client_endpoint.port
    for name in cluster:
        assert not services[name].get("profiles"), f"{name} should start with a plain `docker compose up`"


def test_every_service_runs_the_image_built_here(services):
    images = {name: service.get("image") for name, service in services.items()}
    assert len(set(images.values())) == 1 and None not in images.values(), f"one image for every service: {images}"
    builders = {name: service["build"] for name, service in services.items() if service.get("build")}
    assert builders, "no service builds the image"
    for name, build in builders.items():
        context = build if isinstance(build, str) else build.get("context")
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        assert context in (".", "./") and dockerfile == "Dockerfile", f"{name}: build {build!r}"


def ways_of_starting(services: dict[str, dict]) -> dict[str, list[str]]:
    """The services each documented command starts: `docker compose up` those without a profile,
    `docker compose --profile P up <service>...` those of profile P (named, so no others)."""
    starts = {"docker compose up": [name for name, service in services.items() if not service.get("profiles")]}
    for name, service in services.items():
        for profile in service.get("profiles") or ():
            starts.setdefault(f"docker compose --profile {profile} up", []).append(name)
    return starts


def test_each_way_of_starting_builds_the_image_once(services):
    """One service builds and the others reuse its image: services that each build an image of the same
    name build it once each, and one without a builder among those started would pull it from a registry."""
    for command, started in ways_of_starting(services).items():
        builders = [name for name in started if services[name].get("build")]
        assert len(builders) == 1, f"`{command}` starts {started}, of which {builders or 'none'} build the image"


# --- Dockerfile and .dockerignore ---

def test_the_image_runs_kbroker_as_a_non_root_user_on_its_volume(dockerfile, image_environment):
    final = dockerfile[-1]
    user = last_argument(final, "USER")
    assert user is not None and user.split(":")[0] not in ROOT_USERS, f"USER {user}"
    assert exec_form(last_argument(final, "ENTRYPOINT"))[0] == "kbroker"
    volumes = [path for i in final if i.keyword == "VOLUME"
               for path in (exec_form(i.arguments) if i.arguments.startswith("[") else i.arguments.split())]
    assert DATA_VOLUME in volumes
    config = BrokerConfig.load(environ=image_environment)  # the image's own settings are valid
    assert config.get("log.dirs") == (DATA_VOLUME,)
    assert config.metrics_port == METRICS_PORT
    exposed = {int(port.split("/")[0]) for i in final if i.keyword == "EXPOSE" for port in i.arguments.split()}
    assert {config.client_endpoint.port, CONTROLLER_PORT, METRICS_PORT} <= exposed, exposed


def test_the_image_healthcheck_needs_nothing_but_python(dockerfile):
    command, _ = healthcheck_command(last_argument(dockerfile[-1], "HEALTHCHECK"))
    code = python_code(command)
    assert code is not None, f"HEALTHCHECK {command}: expected python -c"
    compile(code, "<HEALTHCHECK>", "exec")
    assert "/health" in code and "KBROKER_METRICS_PORT" in code, code


def test_dockerignore_keeps_what_pip_needs_and_leaves_out_the_rest():
    rules = dockerignore_rules(DOCKERIGNORE.read_text())
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())
    moved = re.search(r"^MOVED = \(([^)]*)\)", (REPOSITORY / "setup.py").read_text(), re.M)[1]
    packages = ["kbroker", *re.findall(r'"(\w+)"', moved)]  # setup.py installs these folders under kbroker
    needed = ["pyproject.toml", "setup.py", project["project"]["readme"],
              *(f"{package}/__init__.py" for package in packages)]
    assert packages == ["kbroker", "wire", "log", "raft"]
    assert [path for path in needed if is_ignored(path, rules)] == []
    left_out = [".git/HEAD", ".venv/bin/python", "venv/bin/python", "kbroker-data/meta.properties",
                "kbroker/__pycache__/cli.cpython-311.pyc", "wire/schema/__pycache__/x.pyc", ".pytest_cache/v",
                ".hypothesis/examples", "kbroker.egg-info/PKG-INFO", "build/lib/kbroker/cli.py", "dist/x.whl",
                "tests/test_deployment.py"]
    assert [path for path in left_out if not is_ignored(path, rules)] == []


# --- the Dockerfile's install, run here ---

@dataclass(frozen=True)
class Installed:
    venv: Path  # stands for the image's virtual environment
    environment: dict[str, str]  # the image's ENV, its paths mapped to here
    version: str


def build_commands(stage: list[Instruction]) -> tuple[list[str], list[list[str]], str]:
    """The stage's `python -m venv` command, its `pip install` commands and the COPY destination of the context."""
    venv, installs, copied_to = None, [], None
    for instruction in stage:
        if instruction.keyword == "COPY" and not instruction.arguments.startswith("--from"):
            paths = [token for token in shlex.split(instruction.arguments) if not token.startswith("--")]
            assert paths[:-1] == ["."], f"COPY {instruction.arguments}: expected the whole context"
            copied_to = paths[-1]
        if instruction.keyword != "RUN":
            continue
        for command in instruction.arguments.split("&&"):
            tokens = shlex.split(command)
            if tokens[1:3] == ["-m", "venv"]:
                venv = tokens
            elif ("pip" in Path(tokens[0]).name or tokens[1:3] == ["-m", "pip"]) and "install" in tokens:
                installs.append(tokens)
    assert venv and installs and copied_to, "the build stage needs `python -m venv`, COPY . and `pip install`"
    return venv, installs, copied_to


def mapped(token: str, paths: dict[str, str]) -> str:
    """``token`` with an image path (or one below it) replaced by the local directory standing for it."""
    for image_path, local_path in paths.items():
        if token == image_path or token.startswith(image_path.rstrip("/") + "/"):
            return local_path + token[len(image_path.rstrip("/")):]
    return token


def run(command: list[str], timeout_s: float, **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, **options)


def clean_environment() -> dict[str, str]:
    """This machine's environment without what would leak this test's Python or settings into the install."""
    leaking = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    return {name: value for name, value in os.environ.items()
            if name not in leaking and not name.startswith("KBROKER_")}


@pytest.fixture(scope="module")
def installed(dockerfile, tmp_path_factory) -> Installed:
    """The build stage's commands run here: venv, the context copied to its COPY destination, pip install."""
    started = time.monotonic()
    build_stage, final = dockerfile[0], dockerfile[-1]
    venv_command, installs, copied_to = build_commands(build_stage)
    root = tmp_path_factory.mktemp("image")
    venv, context = root / "venv", root / "context"
    paths = {venv_command[-1]: str(venv), copied_to: str(context)}
    created = run([sys.executable, *venv_command[1:-1], str(venv)], INSTALL_TIMEOUT_S, cwd=root)
    if created.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here ({' '.join(venv_command)}): {created.stderr[-2000:]}")
    copy_build_context(context)
    build_environment = stage_environment(build_stage, clean_environment())
    build_environment["PATH"] = f"{venv / 'bin'}{os.pathsep}{build_environment.get('PATH', '')}"
    for install in installs:
        command = [mapped(token, paths) for token in install]
        remaining_s = INSTALL_TIMEOUT_S - (time.monotonic() - started)
        result = run(command, remaining_s, cwd=context, env=build_environment)
        assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    environment = stage_environment(final, clean_environment())
    environment["PATH"] = os.pathsep.join(mapped(entry, paths) for entry in environment["PATH"].split(os.pathsep))
    version = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["version"]
    return Installed(venv, environment, version)


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_the_dockerfile_install_gives_a_working_kbroker_command(installed, tmp_path):
    script = installed.venv / "bin" / "kbroker"
    assert script.is_file(), "pip installed no kbroker console script"
    version = run(["kbroker", "--version"], 30, cwd=tmp_path, env=installed.environment)
    assert version.returncode == 0 and version.stdout.strip() == f"kbroker {installed.version}", version
    usage = run(["kbroker", "--help"], 30, cwd=tmp_path, env=installed.environment)
    assert usage.returncode == 0 and "--override" in usage.stdout, usage
    where = run(["python", "-c", "import kbroker.wire, kbroker.log, kbroker.raft; print(kbroker.log.__file__)"], 30,
                cwd=tmp_path, env=installed.environment)
    assert where.returncode == 0 and where.stdout.startswith(str(installed.venv)), where
    for name in ("wire", "log", "raft"):  # nothing but kbroker is installed at the top level
        assert run(["python", "-c", f"import {name}"], 30, cwd=tmp_path, env=installed.environment).returncode == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_the_installed_broker_passes_the_image_healthcheck_and_stops_cleanly(installed, dockerfile, tmp_path):
    final = dockerfile[-1]
    entrypoint = exec_form(last_argument(final, "ENTRYPOINT")) + exec_form(last_argument(final, "CMD") or "[]")
    healthcheck, healthcheck_timeout_s = healthcheck_command(last_argument(final, "HEALTHCHECK"))
    stop_signal = getattr(signal, last_argument(final, "STOPSIGNAL") or "SIGTERM")
    client_port = free_port()
    environment = {**installed.environment,  # the image's settings, on loopback ports free here
                   "KBROKER_LOG_DIRS": str(tmp_path / "data"),
                   "KBROKER_LISTENERS": f"PLAINTEXT://127.0.0.1:{client_port}",
                   "KBROKER_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{client_port}",
                   "KBROKER_METRICS_PORT": str(free_port()),
                   "KBROKER_SCHEMA_REGISTRY_LISTENERS": f"http://127.0.0.1:{free_port()}"}
    log_path = tmp_path / "broker.log"
    with open(log_path, "w") as log:
        broker = subprocess.Popen(entrypoint, cwd=tmp_path, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            check = run(healthcheck, healthcheck_timeout_s, cwd=tmp_path, env=environment)
            if check.returncode == 0:
                break
            assert broker.poll() is None, f"the broker exited with {broker.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() < deadline, f"unhealthy after 30 s: {check.stderr[-2000:]}\n{log_path.read_text()}"
            time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", client_port), timeout=5):
            pass
        broker.send_signal(stop_signal)
        assert broker.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait()
    after = run(healthcheck, healthcheck_timeout_s, cwd=tmp_path, env=environment)
    assert after.returncode != 0, "the healthcheck passes with no broker running"
