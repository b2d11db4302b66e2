"""The difficulty benchmark: how hard are the families' packages for a capable agent?

It synthesizes packages for chosen families × levels (a level is a difficulty and a number
of user turns; default ``hard:3`` and ``easy:1``), rolls each out under a harness
(``--harness``, default ``tool-calling``) against a *relay*, and reports per family × level
× harness: rollouts, pass rate (the
verifier's ``passed``: reward ≥ the package's pass threshold, 0.99 unless the verifier
spec says otherwise), median tool calls, the share of trajectories over 20 tool calls and
the mean reward.

The relay is a small OpenAI-compatible server on 127.0.0.1. It does not think: each
chat-completions request it receives is written into a queue folder as
``NNNNNN.request.json`` (the request body exactly as a model would receive it, its
sequence number and the trajectory it belongs to) and the relay blocks until
``NNNNNN.answer.json`` appears beside it — the assistant message, written by whoever plays
the agent — and returns that as the completion. The player therefore sees what a model sees
and nothing else: no package, no verifier, no user state. Two commands serve the player:

    python benchmarks/difficulty.py next QUEUE [--wait S]   # the oldest unanswered request:
                                                            # what is new since that
                                                            # trajectory's last request
    python benchmarks/difficulty.py answer QUEUE SEQ --tool NAME --args JSON [--tool ...]
    python benchmarks/difficulty.py answer QUEUE SEQ --text TEXT
    python benchmarks/difficulty.py answer QUEUE SEQ --tool write_file --args @call.json
    python benchmarks/difficulty.py show QUEUE SEQ [--full]  # a request again

A trajectory is recognised by the assistant messages it carries: the relay gives every
tool call it returns an id unique to its request (``call_<seq>_<i>``), so a later request
that contains that call belongs to the same trajectory; a text-only answer is recognised by
its position and text within the same opening (system prompt and first request). A request
repeated by the client's retry is answered from the same queue entry.

    .venv/bin/python benchmarks/difficulty.py --out out/difficulty  # synth, relay, rollouts, table
    .venv/bin/python benchmarks/difficulty.py --families ledger_reconciliation \\
        --levels hard:3 --seeds 0 1 --out out/difficulty
    .venv/bin/python benchmarks/difficulty.py --table-only OUT/rollouts/trajectories.jsonl
    .venv/bin/python benchmarks/difficulty.py relay QUEUE --port 8765   # the relay alone

It prints the table and writes ``OUT/difficulty.md`` and ``OUT/difficulty.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkgym"]
DEFAULT_FAMILIES = ("ledger_reconciliation", "inbox_triage", "calendar_scheduling")
DEFAULT_LEVELS = ("hard:3", "easy:1")
LONG_TRAJECTORY = 20  # the paper's cut: share of trajectories over 20 tool steps
POLL_S = 0.2


# ---- the relay --------------------------------------------------------------------------
def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _request_path(queue: Path, seq: int) -> Path:
    return queue / f"{seq:06d}.request.json"


def _answer_path(queue: Path, seq: int) -> Path:
    return queue / f"{seq:06d}.answer.json"


@dataclass
class _Entry:
    seq: int
    trajectory: str
    messages: int  # how many messages the request carried


class Relay:
    """The queue's bookkeeping: which trajectory a request belongs to, its sequence number,
    the answer's turn into a chat completion. Thread-safe; the HTTP layer is ``serve``."""

    def __init__(self, queue: Path, *, answer_timeout_s: float | None = None) -> None:
        self.queue = queue
        self.queue.mkdir(parents=True, exist_ok=True)
        self.answer_timeout_s = answer_timeout_s
        self._lock = threading.Lock()
        queued = sorted(queue.glob("*.request.json"))
        self._seq = max((_seq_of(p) for p in queued), default=0)
        # a queue reused by a resumed run goes on numbering after its trajectories
        self._trajectories = max(
            (int(json.loads(p.read_text())["trajectory"][1:]) for p in queued), default=0
        )
        self._by_body: dict[str, int] = {}  # digest of the messages → seq (client retries)
        self._by_answer: dict[str, str] = {}  # an answered message's key → trajectory
        self._last: dict[str, _Entry] = {}  # trajectory → its latest request
        self._entries: dict[int, _Entry] = {}

    def submit(self, body: dict[str, Any]) -> int:
        """Queue a request (or find it queued already); returns its sequence number."""
        messages = body.get("messages") or []
        key = _digest(messages)
        with self._lock:
            queued = self._by_body.get(key)
            # the same body again is the client retrying its latest request; a later
            # rollout that opens with the same messages (another seed, the same
            # instruction) is a new trajectory and gets its own answer
            if queued is not None and self._last[self._entries[queued].trajectory].seq == queued:
                return queued
            trajectory = self._trajectory_of(messages)
            previous = self._last.get(trajectory)
            self._seq += 1
            seq = self._seq
            entry = _Entry(seq, trajectory, len(messages))
            step = 1 + sum(1 for e in self._entries.values() if e.trajectory == trajectory)
            record = {
                "seq": seq,
                "trajectory": trajectory,
                "step": step,
                "previous_seq": previous.seq if previous else None,
                # the messages after the previous request's and the answer to it
                "new_from": previous.messages + 1 if previous else 0,
                "received_at": time.time(),
                "body": body,
            }
            tmp = _request_path(self.queue, seq).with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=1))
            tmp.replace(_request_path(self.queue, seq))
            self._by_body[key] = seq
            self._last[trajectory] = entry
            self._entries[seq] = entry
            return seq

    def wait(self, seq: int, stop: threading.Event | None = None) -> dict[str, Any] | None:
        """The answer to ``seq`` once it is written (None when the wait times out or
        ``stop`` is set), as an assistant message with relay-unique tool call ids."""
        path = _answer_path(self.queue, seq)
        limit = self.answer_timeout_s
        deadline = None if limit is None else time.monotonic() + limit
        while not path.exists():
            if (stop is not None and stop.is_set()) or (
                deadline is not None and time.monotonic() > deadline
            ):
                return None
            time.sleep(POLL_S)
        message = assistant_message(json.loads(path.read_text()), seq)
        entry = self._entries[seq]
        with self._lock:
            self._by_answer[_answer_key(message, entry.messages, self._opening(seq))] = (
                entry.trajectory
            )
        return message

    def completion(self, body: dict[str, Any], seq: int, message: dict[str, Any]) -> dict[str, Any]:
        prompt = sum(len(json.dumps(m)) for m in body.get("messages") or []) // 4
        completion = len(json.dumps(message)) // 4
        return {
            "id": f"relay-{seq}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "relay"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _opening(self, seq: int) -> str:
        record = json.loads(_request_path(self.queue, seq).read_text())
        return _digest((record["body"].get("messages") or [])[:2])

    def _trajectory_of(self, messages: Sequence[dict[str, Any]]) -> str:
        opening = _digest(list(messages[:2]))
        for index in range(len(messages) - 1, 1, -1):
            message = messages[index]
            if message.get("role") != "assistant":
                continue
            found = self._by_answer.get(_answer_key(message, index, opening))
            if found is not None:
                return found
        self._trajectories += 1
        return f"t{self._trajectories:03d}"


def _seq_of(path: Path) -> int:
    return int(path.name.split(".", 1)[0])


def _answer_key(message: dict[str, Any], index: int, opening: str) -> str:
    ids = [c.get("id", "") for c in message.get("tool_calls") or []]
    if ids:
        return "calls:" + ",".join(ids)
    return f"text:{opening}:{index}:{_digest(message.get('content') or '')}"


def assistant_message(answer: dict[str, Any], seq: int) -> dict[str, Any]:
    """An answer file as an OpenAI assistant message. The answer holds ``content`` and/or
    ``tool_calls`` (OpenAI's shape, or the short ``{"name", "arguments"}``; arguments as a
    JSON string or an object); each call gets the id ``call_<seq>_<i>``."""
    calls = []
    for index, call in enumerate(answer.get("tool_calls") or []):
        function = call.get("function", call)
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": f"call_{seq}_{index}",
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": arguments},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": answer.get("content") or ""}
    if calls:
        message["tool_calls"] = calls
    return message


class _Handler(BaseHTTPRequestHandler):
    server: _RelayServer

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "relay", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError as exc:
            self._send(400, {"error": {"message": f"not JSON: {exc}"}})
            return
        if body.get("stream"):
            self._send(400, {"error": {"message": "the relay does not stream"}})
            return
        relay = self.server.relay
        seq = relay.submit(body)
        message = relay.wait(seq, self.server.stopping)
        if message is None:
            self._send(504, {"error": {"message": f"no answer to request {seq}"}})
            return
        self._send(200, relay.completion(body, seq, message))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (and retries)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _RelayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, relay: Relay) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.relay = relay
        self.stopping = threading.Event()


class RelayServer:
    """The relay on 127.0.0.1 in a background thread; ``url`` is its ``/v1`` base."""

    def __init__(self, queue: Path, port: int = 0, answer_timeout_s: float | None = None) -> None:
        self._server = _RelayServer(port, Relay(queue, answer_timeout_s=answer_timeout_s))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RelayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()


# ---- the player's side ------------------------------------------------------------------
def unanswered(queue: Path) -> list[int]:
    return sorted(
        _seq_of(p)
        for p in queue.glob("*.request.json")
        if not _answer_path(queue, _seq_of(p)).exists()
    )


def render_request(record: dict[str, Any], *, full: bool = False, max_chars: int = 0) -> str:
    """A request as the player reads it: what is new since that trajectory's previous
    request (everything, for its first request or with ``full``) and the tools offered
    (their descriptions and parameters on a trajectory's first request)."""
    body = record["body"]
    messages = body.get("messages") or []
    start = 0 if full else int(record.get("new_from") or 0)
    lines = [
        f"== request {record['seq']} · trajectory {record['trajectory']} · step "
        f"{record['step']} · {len(messages) - start} new of {len(messages)} messages =="
    ]
    for index in range(start, len(messages)):
        lines.append(_render_message(index, messages[index], max_chars))
    tools = body.get("tools") or []
    if start == 0:
        lines.append("-- tools --")
        for tool in tools:
            function = tool.get("function", tool)
            lines.append(f"* {function.get('name')}: {function.get('description', '')}")
            lines.append(f"  parameters: {json.dumps(function.get('parameters', {}))}")
    else:
        names = ", ".join(str(t.get("function", t).get("name")) for t in tools)
        lines.append(f"-- tools: {names}")
    return "\n".join(lines)


def _render_message(index: int, message: dict[str, Any], max_chars: int) -> str:
    role = message.get("role", "?")
    content = str(message.get("content") or "")
    if max_chars and len(content) > max_chars:
        content = content[:max_chars] + f"\n[… {len(content) - max_chars} more characters]"
    head = f"[{index} {role}"
    if role == "tool":
        head += f" {message.get('tool_call_id')}"
    text = f"{head}]\n{content}" if content else f"{head}]"
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += f"\n  -> {function.get('name')}({function.get('arguments')}) id={call.get('id')}"
    return text


def next_request(queue: Path, wait_s: float, *, full: bool, max_chars: int) -> str | None:
    deadline = time.monotonic() + wait_s
    while True:
        pending = unanswered(queue)
        if pending:
            record = json.loads(_request_path(queue, pending[0]).read_text())
            return render_request(record, full=full, max_chars=max_chars)
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def write_answer(
    queue: Path, seq: int, *, text: str = "", tools: Sequence[tuple[str, str]] = ()
) -> Path:
    """Write the answer to request ``seq``: ``text`` and/or tool calls (name, JSON args)."""
    if not _request_path(queue, seq).exists():
        raise ValueError(f"no request {seq} in {queue}")
    path = _answer_path(queue, seq)
    if path.exists():
        raise ValueError(f"request {seq} is answered already")
    calls = []
    for name, raw in tools:
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"--args for {name} is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"--args for {name} must be a JSON object")
        calls.append({"type": "function", "function": {"name": name, "arguments": raw}})
    if not calls and not text:
        raise ValueError("give --text or at least one --tool")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"content": text, "tool_calls": calls}, indent=1))
    tmp.replace(path)
    return path


# ---- the table --------------------------------------------------------------------------
@dataclass
class Row:
    family: str
    level: str
    harness: str = "tool-calling"
    rollouts: int = 0
    valid: int = 0
    pass_rate: float | None = None
    median_tool_calls: float | None = None
    over_20: float | None = None
    mean_reward: float | None = None
    tool_calls: list[int] = field(default_factory=list)


def tool_calls_of(trajectory: Any) -> int:
    """Tool calls the agent made (every call, ask_user and finish included)."""
    return sum(len(m.tool_calls) for m in trajectory.messages if m.source == "agent")


def table_rows(trajectories: Iterable[Any]) -> list[Row]:
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for t in trajectories:
        difficulty = t.environment.labels.get("difficulty", "?")
        level = f"{difficulty}:{t.environment.turns}"
        groups[(t.environment.family or "?", level, t.policy.harness)].append(t)
    rows = []
    for (family, level, harness), group in sorted(groups.items()):
        row = Row(family, level, harness, rollouts=len(group))
        valid = [t for t in group if t.verification is not None and t.verification.valid]
        row.valid = len(valid)
        row.tool_calls = sorted(tool_calls_of(t) for t in group)
        if valid:
            row.pass_rate = round(sum(bool(t.verification.passed) for t in valid) / len(valid), 4)
            rewards = [float(t.verification.reward) for t in valid]
            row.mean_reward = round(sum(rewards) / len(rewards), 4)
        if row.tool_calls:
            row.median_tool_calls = statistics.median(row.tool_calls)
            long = sum(n > LONG_TRAJECTORY for n in row.tool_calls)
            row.over_20 = round(long / len(row.tool_calls), 4)
        rows.append(row)
    return rows


def render_table(rows: Sequence[Row]) -> str:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{100 * value:.0f} %"

    def num(value: float | None, pattern: str = "{:.3f}") -> str:
        return "—" if value is None else pattern.format(value)

    lines = [
        "| family | difficulty:turns | harness | rollouts (valid) | pass rate "
        "| median tool calls | over 20 tool calls | mean reward | tool calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.family} | {r.level} | `{r.harness}` | {r.rollouts} ({r.valid}) | "
            f"{pct(r.pass_rate)} | "
            f"{num(r.median_tool_calls, '{:g}')} | {pct(r.over_20)} | {num(r.mean_reward)} | "
            f"{', '.join(map(str, r.tool_calls))} |"
        )
    return "\n".join(lines)


def read_trajectories(path: Path) -> list[Any]:
    from coworkgym.rollout.trajectory import Trajectory

    if not path.exists():
        return []
    return [Trajectory.model_validate_json(line) for line in path.read_text().splitlines() if line]


def write_table(trajectories: Sequence[Any], out: Path | None) -> str:
    rows = table_rows(trajectories)
    text = render_table(rows)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "difficulty.md").write_text(text + "\n")
        (out / "difficulty.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return text


# ---- the run ----------------------------------------------------------------------------
def log(text: str) -> None:
    print(f"[difficulty {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def parse_level(text: str) -> tuple[str, int]:
    difficulty, _, turns = text.partition(":")
    if difficulty not in ("easy", "medium", "hard") or not turns.isdigit():
        raise argparse.ArgumentTypeError(f"a level is DIFFICULTY:TURNS, e.g. hard:3 (got {text})")
    return difficulty, int(turns)


def synthesize(
    families: Sequence[str], levels: Sequence[tuple[str, int]], seeds: Sequence[int], out: Path
) -> list[Path]:
    """Specs for every family × level × seed, synthesized with ``cowork-gym synth``
    (resumable: an environment already released from the same spec is skipped)."""
    import yaml

    from coworkgym.families import family_named

    specs, envs = out / "specs", out / "packages"
    specs.mkdir(parents=True, exist_ok=True)
    names = []
    for family_name in families:
        family = family_named(family_name)
        for difficulty, turns in levels:
            for seed in seeds:
                name = f"{family_name.replace('_', '-')}-{difficulty}{turns}-s{seed}"
                names.append(name)
                labels = {
                    "capabilities": [family.capabilities_at(turns)[0]],
                    "scenario": family.scenarios[0],
                    "difficulty": difficulty,
                    "deliverables": list(family.deliverables),
                    "modality": list(family.modalities),
                }
                spec = {
                    "apiVersion": "coworkgym.dev/v1alpha1",
                    "kind": "CoworkEnvironment",
                    "metadata": {"name": name},
                    "spec": {
                        "task": {"family": family_name, "labels": labels, "turns": turns,
                                 "seed": seed},
                    },
                }  # fmt: skip
                (specs / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    command = [*CLI, "synth", str(specs), "--out", str(envs), "--workers", "1", "--no-harbor-lint"]
    log(f"synthesizing {len(names)} packages (command and output in {out / 'synth.log'})")
    with (out / "synth.log").open("ab") as sink:
        sink.write(("$ " + " ".join(command) + "\n").encode())
        sink.flush()
        subprocess.run(command, check=False, stdout=sink, stderr=subprocess.STDOUT)
    missing = [n for n in names if not (envs / n).is_dir()]
    if missing:
        log(f"{len(missing)} not released (left out; see synth.log)")
    return [envs / n for n in names if (envs / n).is_dir()]


def rollout(packages: Sequence[Path], relay_url: str, args: argparse.Namespace) -> Path:
    out = args.out / "rollouts"
    command = [
        *CLI, "rollout", *map(str, packages), "--harness", args.harness, "--model", "relay",
        "--base-url", relay_url, "--request-timeout", str(args.request_timeout),
        "--timeout", str(args.rollout_timeout), "--max-steps", str(args.max_steps),
        "--token-budget", str(args.token_budget), "--samples", str(args.samples),
        "--workers", str(args.workers), "--no-logprobs", "--out", str(out),
    ]  # fmt: skip
    # the command (package names) and its output (rewards as rollouts finish) go to a
    # file: the player sees the requests only, not which package or how one scored
    log(f"rolling out {len(packages)} packages (command and output in {args.out / 'rollout.log'})")
    env = {**os.environ, "COWORKGYM_LLM_API_KEY": "relay"}
    with (args.out / "rollout.log").open("ab") as sink:
        sink.write(("$ " + " ".join(command) + "\n").encode())
        sink.flush()
        subprocess.run(command, check=False, env=env, stdout=sink, stderr=subprocess.STDOUT)
    return Path(out / "trajectories.jsonl")


def run(args: argparse.Namespace) -> int:
    if args.table_only:  # several files: one table (e.g. a run per harness)
        print(write_table([t for path in args.table_only for t in read_trajectories(path)], None))
        return 0
    packages = synthesize(args.families, args.levels, args.seeds, args.out)
    if not packages:
        log("no package was released; nothing to roll out")
        return 1
    queue = args.queue or args.out / "queue"
    with RelayServer(queue, args.port) as relay:
        log(f"relay on {relay.url}; queue {queue}")
        log(f"player: python benchmarks/difficulty.py next {queue} --wait 600")
        trajectories = rollout(packages, relay.url, args)
    text = write_table(read_trajectories(trajectories), args.out)
    print(text)
    log(f"table written to {args.out / 'difficulty.md'} and {args.out / 'difficulty.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("next", "show", "answer", "relay"):
        return _player_command(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=list(DEFAULT_FAMILIES))
    parser.add_argument(
        "--levels", nargs="+", type=parse_level, default=[parse_level(x) for x in DEFAULT_LEVELS],
        help="DIFFICULTY:TURNS, e.g. hard:3 easy:1",
    )  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--samples", type=int, default=1, help="rollouts per package")
    parser.add_argument(
        "--harness", default="tool-calling",
        help="the harness the rollouts run under (cowork-gym rollout --harness): what the "
        "player sees is that harness's interface",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "difficulty")
    parser.add_argument("--queue", type=Path, default=None, help="default OUT/queue")
    parser.add_argument("--port", type=int, default=0, help="the relay's port (0: any free)")
    parser.add_argument("--workers", type=int, default=1, help="parallel rollouts")
    parser.add_argument("--max-steps", type=int, default=200, help="model calls per rollout")
    parser.add_argument("--request-timeout", type=float, default=6 * 3600.0)
    parser.add_argument("--rollout-timeout", type=float, default=12 * 3600.0)
    parser.add_argument("--token-budget", type=int, default=200_000_000)
    parser.add_argument(
        "--table-only", type=Path, nargs="+", default=None, metavar="TRAJECTORIES.jsonl",
        help="only print the table of these trajectories (one table over several files)",
    )  # fmt: skip
    return run(parser.parse_args(argv))


def _player_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="difficulty.py")
    commands = parser.add_subparsers(dest="command", required=True)
    nxt = commands.add_parser("next", help="print the oldest unanswered request")
    nxt.add_argument("queue", type=Path)
    nxt.add_argument("--wait", type=float, default=0.0, help="seconds to wait for one")
    nxt.add_argument("--full", action="store_true", help="every message, not only the new")
    nxt.add_argument("--max-chars", type=int, default=0, help="cut long messages (0: never)")
    show = commands.add_parser("show", help="print request SEQ again")
    show.add_argument("queue", type=Path)
    show.add_argument("seq", type=int)
    show.add_argument("--full", action="store_true", help="every message, not only the new")
    show.add_argument("--max-chars", type=int, default=0, help="cut long messages (0: never)")
    answer = commands.add_parser("answer", help="answer request SEQ")
    answer.add_argument("queue", type=Path)
    answer.add_argument("seq", type=int)
    answer.add_argument("--text", default="")
    answer.add_argument("--tool", action="append", default=[], help="a tool call's name")
    answer.add_argument(
        "--args",
        action="append",
        default=[],
        help="its arguments (a JSON object), one per --tool; @FILE reads them from FILE",
    )
    relay = commands.add_parser("relay", help="run the relay alone")
    relay.add_argument("queue", type=Path)
    relay.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    if args.command == "next":
        text = next_request(args.queue, args.wait, full=args.full, max_chars=args.max_chars)
        print(text if text is not None else "no unanswered request")
        return 0 if text is not None else 3
    if args.command == "show":
        path = _request_path(args.queue, args.seq)
        if not path.exists():
            parser.error(f"no request {args.seq} in {args.queue}")
        record = json.loads(path.read_text())
        print(render_request(record, full=args.full, max_chars=args.max_chars))
        return 0
    if args.command == "answer":
        if len(args.args) != len(args.tool):
            parser.error("give one --args per --tool")
        try:
            raw = [Path(a[1:]).read_text() if a.startswith("@") else a for a in args.args]
            calls = list(zip(args.tool, raw, strict=True))
            path = write_answer(args.queue, args.seq, text=args.text, tools=calls)
        except (OSError, ValueError) as exc:
            parser.error(str(exc))
        print(f"answered: {path}")
        return 0
    with RelayServer(args.queue, args.port) as server:
        log(f"relay on {server.url}; queue {args.queue}; Ctrl-C ends it")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
