"""The agent loop's robustness and the gateway's key isolation, over real HTTP and real
sandboxes: malformed and failing tool calls are answered, not fatal; 429/5xx are retried;
a hanging upstream, a spent token budget and exhausted turns each end the stage with a
clear status; and the upstream API key is never visible inside a sandbox."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from coworkgym.llm.agent import NUDGE, Agent, AgentConfig
from coworkgym.llm.errors import AgentError, AgentStatus
from coworkgym.llm.gateway import Gateway
from coworkgym.llm.session import LLMSession
from coworkgym.llm.settings import LLMSettings
from coworkgym.llm.tools import Args, RoleMounts, Tool, ToolBox, ToolResult, standard_tools
from coworkgym.loop.local import LocalLoop
from coworkgym.loop.machine import Phase
from coworkgym.release import publisher_for
from coworkgym.roles.llm import configure_llm_backends, role_backends
from coworkgym.runtime.local import LocalRuntime
from coworkgym.sandbox import Mount, default_sandbox
from coworkgym.spec import EnvironmentSpec
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(60)
MODEL = "scripted-model"
SYSTEM = "You are a test agent."


class FinishArgs(Args):
    summary: str = ""


def finish_tool() -> Tool[FinishArgs]:
    return Tool("finish", "Stop.", FinishArgs, lambda a: ToolResult("finished", done=True))


@pytest.fixture
def dirs(tmp_path: Path) -> RoleMounts:
    work, ro = tmp_path / "work", tmp_path / "ro"
    work.mkdir()
    ro.mkdir()
    (ro / "given.txt").write_text("read-only input\n")
    return RoleMounts((Mount(work, "/work", writable=True), Mount(ro, "/ro")), cwd="/work")


def agent(client: openai.OpenAI, mounts: RoleMounts, **config: Any) -> Agent:
    tools = ToolBox.of([*standard_tools(mounts, default_sandbox()), finish_tool()])
    return Agent(client, tools, AgentConfig(model=MODEL, **config), name="test")


@pytest.fixture
def scripted(request: pytest.FixtureRequest) -> Iterator[tuple[ScriptedServer, openai.OpenAI]]:
    """The scripted server replaying the fixture ``script`` names, and a client straight
    to it (no gateway: these tests are about the agent loop)."""
    name, options = request.param
    with ScriptedServer.from_fixture(name) as server:
        client = openai.OpenAI(base_url=server.url, api_key="test", **options)
        with client:
            yield server, client


def script(name: str, **client_options: Any) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("scripted", [(name, client_options)], indirect=True, ids=[name])


# ---- tool errors and malformed output ---------------------------------------------------
@script("tool_errors", max_retries=0)
def test_malformed_and_failing_tool_calls_are_answered_not_fatal(
    scripted: tuple[ScriptedServer, openai.OpenAI], dirs: RoleMounts
) -> None:
    server, client = scripted
    result = agent(client, dirs).run(SYSTEM, "Write notes.md, then finish.")
    assert result.final.done and result.turns == 14
    assert result.final.text == "finished"
    assert result.tool_errors == 10
    answers = server.requests[-1].tool_results()
    expected = [
        "arguments of write_file are not valid JSON",
        "unknown tool 'delete_everything'; the tools are: shell, read_file",
        "arguments of shell must be a JSON object",
        "bad arguments for write_file: content: Field required",
        "/etc/shadow is outside this role's directories (/work, /ro)",
        "/etc/passwd is outside this role's directories",
        "/ro/planted.txt is read-only for this role",
        "etc_link",  # the shell made the symlink …
        "/work/etc_link/passwd leads outside this role's directories (through a symlink",
        "/work/missing.md is not a file; create it with write_file",
        "exit 3",
        "wrote 6 bytes to /work/notes.md",
    ]
    assert len(answers) == len(expected)
    for answer, fragment in zip(answers, expected, strict=True):
        assert fragment in answer
    assert "root:" not in "\n".join(answers)  # nothing of /etc/passwd came through
    nudged = [m for m in server.requests[-2].messages if m.get("content") == NUDGE]
    assert len(nudged) == 1  # the reply without a tool call was answered with a nudge
    work = dirs.mounts[0].source
    assert (work / "notes.md").read_text() == "hello\n"
    assert not (dirs.mounts[1].source / "planted.txt").exists()


# ---- the upstream misbehaves ------------------------------------------------------------
@script("retries", max_retries=3)
def test_429_and_5xx_are_retried_with_backoff(
    scripted: tuple[ScriptedServer, openai.OpenAI], dirs: RoleMounts
) -> None:
    server, client = scripted
    result = agent(client, dirs).run(SYSTEM, "Finish.")
    assert result.final.done
    assert len(server.requests) == 3  # 503, 429, then the answer


@script("hang", max_retries=1, timeout=0.5)
def test_an_upstream_that_hangs_ends_the_stage_with_a_status_not_a_hang(
    scripted: tuple[ScriptedServer, openai.OpenAI], dirs: RoleMounts
) -> None:
    _, client = scripted
    started = time.monotonic()
    with pytest.raises(AgentError) as caught:
        agent(client, dirs).run(SYSTEM, "Finish.")
    assert caught.value.status == AgentStatus.UPSTREAM_UNAVAILABLE
    assert caught.value.retryable  # the loop may try the stage once more
    assert time.monotonic() - started < 10


@script("turns", max_retries=0)
def test_the_stage_deadline_ends_a_slow_session(
    scripted: tuple[ScriptedServer, openai.OpenAI], dirs: RoleMounts
) -> None:
    _, client = scripted
    ticks = iter(range(0, 10_000, 400))  # every call to the clock is 400 "seconds" later
    slow = Agent(
        client,
        ToolBox.of(standard_tools(dirs, default_sandbox(), names=("list_files",))),
        AgentConfig(model=MODEL, stage_timeout_s=900),
        clock=lambda: float(next(ticks)),
    )
    with pytest.raises(AgentError) as caught:
        slow.run("# Role: Builder (a slow one)", "Work forever.")
    assert caught.value.status == AgentStatus.STAGE_TIMEOUT and not caught.value.retryable


# ---- budgets end the stage through the loop ---------------------------------------------
def loop_spec(base_url: str, max_turns: int = 40) -> EnvironmentSpec:
    spec = EnvironmentSpec.model_validate(
        {
            "task": {
                "labels": {
                    "capabilities": ["data_analysis"],
                    "scenario": "data_analysis/reporting/periodic_report",  # a taxonomy leaf
                }
            }
        }
    )
    configure_llm_backends(spec, base_url=base_url, model=MODEL)
    spec.backends.builder.max_turns = max_turns
    return spec


@pytest.mark.parametrize(
    ("fixture", "budget", "max_turns", "status", "calls"),
    [
        # 120 tokens per reply: 3 calls reach 360 ≥ 250, the 4th is refused at the gateway
        ("budget", 250, 40, AgentStatus.TOKENS_EXHAUSTED, 3),
        ("turns", 1_000_000, 3, AgentStatus.TURNS_EXHAUSTED, 3),
    ],
    ids=["token-budget", "max-turns"],
)
def test_an_exhausted_budget_fails_the_stage_with_a_clear_status(
    tmp_path: Path, fixture: str, budget: int, max_turns: int, status: str, calls: int
) -> None:
    with ScriptedServer.from_fixture(fixture) as server:
        spec = loop_spec(server.url, max_turns)
        settings = {"builder": LLMSettings.from_backend(spec.backends.builder)}
        with Gateway(token_budget=budget) as gateway:
            session = LLMSession(gateway, settings)
            runtime = LocalRuntime()
            with role_backends("env", spec, runtime, session=session) as roles:
                loop = LocalLoop(
                    roles.builder, roles.constructor, roles.detector, publisher_for(str(tmp_path))
                )
                run = loop.run("env", spec)
            rejected = gateway.metrics.requests.labels("builder", MODEL, "rejected_budget")
            refusals = rejected._value.get()
    assert run.status.phase == Phase.FAILED
    assert run.status.message.startswith(f"builder failed: {status}:")
    assert run.status.iteration == 0  # failed in the first stage, no retry: budgets are final
    assert len(server.requests) == calls
    assert refusals == (1 if status == AgentStatus.TOKENS_EXHAUSTED else 0)


# ---- key isolation ----------------------------------------------------------------------
def test_the_api_key_never_enters_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-upstream-{secrets.token_hex(16)}"
    monkeypatch.setenv("COWORKGYM_LLM_API_KEY", secret)  # in this process's env, as usual
    socket_dir = tmp_path / "gateway"
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedServer.from_fixture("isolation", expected_key=secret) as server:
        session = LLMSession.start(
            {"builder": LLMSettings(model=MODEL, base_url=server.url)},
            unix_socket=socket_dir / "llm.sock",
        )
        try:
            gateway = session.gateway
            sandbox_token = gateway.grant("iso", "builder", session.route("builder"))
            # moved out of the environment: no child process (bwrap included) inherits it
            assert "COWORKGYM_LLM_API_KEY" not in os.environ
            mounts = RoleMounts(
                (Mount(work, "/work", writable=True), Mount(socket_dir, "/run/cowork-llm")),
                cwd="/work",
            )
            env = {
                "COWORK_LLM_SOCKET": "/run/cowork-llm/llm.sock",
                "COWORK_LLM_TOKEN": sandbox_token,
                "GATEWAY_PORT": str(gateway.port),
            }
            tools = ToolBox.of([*standard_tools(mounts, default_sandbox(), env=env), finish_tool()])
            with session.client("iso", "builder") as client:
                agent_key = client.api_key
                Agent(client, tools, AgentConfig(model=MODEL)).run(SYSTEM, "Probe.")
            with_real_key = httpx.post(
                f"{gateway.url}/chat/completions",
                json={"model": MODEL, "messages": []},
                headers={"Authorization": f"Bearer {secret}"},
            )
        finally:
            session.close()

    # the agent side only ever held a gateway token; the key is no credential at the gateway
    assert agent_key.startswith("cwg-") and secret not in agent_key
    assert with_real_key.status_code == 401
    # upstream saw the real key on every request: the gateway swapped it in
    assert len(server.requests) == 4
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {secret}"}
    # … and never the key in any content (nothing leaked into a conversation)
    assert not any(secret in json.dumps(r.body) for r in server.requests)
    probe = server.requests[1].tool_results()[-1]
    env_dump = probe.split("--- grep")[0]
    assert "COWORK_LLM_TOKEN=cwg-" in env_dump  # the dump really ran, with the sandbox's env
    assert "COWORKGYM_LLM_API_KEY" not in env_dump and "sk-upstream-" not in env_dump
    assert "files holding the key: none" in probe  # no mounted or visible file holds it
    assert probe.count("COWORK_LLM_TOKEN=cwg-") == 2  # env and /proc/self/environ were read
    assert "Connection refused" in probe.split("--- tcp")[1]  # no network to the gateway's port
    # the sandboxed client reached the model through the mounted socket with its token
    in_sandbox = server.requests[2]
    assert in_sandbox.body["messages"][0]["content"] == "hi from the sandbox"
    assert in_sandbox.body["model"] == MODEL  # pinned by the route, whatever was asked
    client_output = server.requests[3].tool_results()[-1]
    assert "status 200" in client_output and "hello from upstream" in client_output
    assert secret not in probe + client_output
