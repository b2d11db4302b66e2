"""Compose services beside a Harbor task's phases (issue 26): one network namespace where a
phase reaches a service by its name, which the host's network never reaches; offline unless
the task allows its phases the network; and a volume main mounts kept with the agent phase's
state for the verifier. Real namespaces, sandboxes and overlays (root); the service here is
the host's own Python serving files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkgym.image.compose import Service
from coworkgym.image.services import service_argv
from coworkgym.sandbox import BubblewrapSandbox, Mount, RootOverlay
from coworkgym.sandbox.netns import NetworkNamespace, network_namespace, unavailable
from coworkgym.sandbox.overlay import overlay_unavailable
from tests.unit.test_writable_image_root import image  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(
    unavailable(online=False) is not None, reason=f"no namespace here: {unavailable(False)}"
)

PORT = 18473  # what the service listens on inside its namespace
PYTHON = "/usr/bin/python3"


@contextlib.contextmanager
def serving(netns: NetworkNamespace, root: Path) -> Iterator[None]:
    """The host's Python serving ``root`` on PORT in the namespace, as a service runs."""
    (root / "hello.txt").write_text("from the tool\n")
    os.chmod(root, 0o755)
    sandbox = BubblewrapSandbox(netns=netns, mounts=[Mount(root, "/srv/www")])
    argv = [PYTHON, "-m", "http.server", str(PORT), "--directory", "/srv/www"]
    proc = subprocess.Popen(
        sandbox.command(argv, [], {}, "/"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def fetch(netns: NetworkNamespace, url: str) -> subprocess.CompletedProcess[str] | None:
    """A phase's GET of ``url``, retried while the service starts (None: never answered)."""
    phase = BubblewrapSandbox(netns=netns)
    code = f"import urllib.request; print(urllib.request.urlopen('{url}', timeout=5).read())"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        result = phase.run([PYTHON, "-c", code], [])
        if result.exit_code == 0:
            return subprocess.CompletedProcess([], 0, result.stdout, result.stderr)
        time.sleep(0.2)
    return None


def test_a_phase_reaches_a_service_by_its_name(tmp_path: Path) -> None:
    with network_namespace(["tool"], online=False) as netns, serving(netns, tmp_path):
        answer = fetch(netns, f"http://tool:{PORT}/hello.txt")
        assert answer is not None and "from the tool" in answer.stdout


def test_the_service_is_not_on_the_hosts_network(tmp_path: Path) -> None:
    with network_namespace(["tool"], online=False) as netns, serving(netns, tmp_path):
        assert fetch(netns, f"http://tool:{PORT}/hello.txt") is not None  # it is up
        with socket.socket() as probe:
            probe.settimeout(2)
            assert probe.connect_ex(("127.0.0.1", PORT)) != 0  # the host's loopback: nothing


def test_an_offline_namespace_reaches_nothing_beyond_itself() -> None:
    with network_namespace([], online=False) as netns:
        phase = BubblewrapSandbox(netns=netns)
        code = "import socket; socket.create_connection(('192.0.2.1', 80), timeout=3)"
        result = phase.run([PYTHON, "-c", code], [])
        assert result.exit_code != 0 and "unreachable" in result.stderr
        assert not phase.network


@pytest.mark.skipif(unavailable(online=True) is not None, reason="no pasta (passt) here")
def test_an_online_namespace_routes_out_through_pasta() -> None:
    with network_namespace(["tool"], online=True) as netns:
        routes = subprocess.run(
            [*netns.enter(), "ip", "route"], capture_output=True, text=True, check=True
        )
        assert routes.stdout.startswith("default via")
        assert BubblewrapSandbox(netns=netns).network
    assert not Path(netns.path).exists()  # the namespace's holder is gone with the block


@pytest.mark.skipif(overlay_unavailable() is not None, reason="no overlay root here")
def test_a_volume_main_mounts_is_kept_with_the_agent_phases_state(
    image: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    volume = tmp_path / "tool_log"
    volume.mkdir()
    (volume / "requests.ndjson").write_text('{"endpoint": "gmail.messages.send"}\n')
    agent = BubblewrapSandbox(rootfs=image, mounts=[Mount(volume, "/srv/tool-log")])
    state = RootOverlay(tmp_path / "state-root")
    seen = agent.run(["bash", "-c", "echo hi > /srv/tool-log/forged"], [], root=state)
    assert seen.exit_code != 0  # read-only for the agent, as compose's :ro says
    assert (state.changes / "srv/tool-log/requests.ndjson").read_text().startswith('{"endpoint"')

    (volume / "requests.ndjson").write_text("written after the agent phase\n")
    verifier = BubblewrapSandbox(rootfs=image)  # no live volume: the state's copy
    read = verifier.run(
        ["bash", "-c", "read -r line < /srv/tool-log/requests.ndjson; echo $line"],
        [],
        root=RootOverlay(tmp_path / "verifier-root", below=(state.changes,)),
    )
    assert read.exit_code == 0 and "gmail.messages.send" in read.stdout


def test_compose_commands_replace_the_images() -> None:
    config: dict[str, object] = {"Entrypoint": ["/entry"], "Cmd": ["serve", "--port", "80"]}
    assert service_argv(Service("s"), config) == ["/entry", "serve", "--port", "80"]
    assert service_argv(Service("s", command=("run",)), config) == ["/entry", "run"]
    assert service_argv(Service("s", entrypoint=("/other",)), config) == ["/other"]  # CMD dropped
    assert service_argv(Service("s", entrypoint=("/o",), command=("x",)), config) == ["/o", "x"]


def test_a_request_logs_values_are_perturbed_on_every_line(tmp_path: Path) -> None:
    """A service's log (one JSON value a line) is corrupted as a .json file is: an encoded
    field's digits alone shifted could leave what it decodes to intact."""
    import json

    from coworkgym.detector.mutations import wrong_values

    log = tmp_path / "requests.ndjson"
    lines = [
        {"endpoint": "gmail.messages.send", "body": {"raw": "SSBjYW5ub3Qu"}},
        {"endpoint": "calendar.events.list", "body": {}},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert wrong_values(log) == "numbers and strings perturbed on every line"
    perturbed = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(perturbed) == 2
    assert all(p["endpoint"] != o["endpoint"] for p, o in zip(perturbed, lines, strict=True))
    assert perturbed[0]["body"]["raw"] != "SSBjYW5ub3Qu"
