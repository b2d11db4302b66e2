"""``ChatServer``: the OpenAI chat-completions API over a ``Generator``, on 127.0.0.1 (or
the address it is given: 0.0.0.0 in an on-policy round's server pod, serving.checkpoint).

    GET  /v1/models             the one model, under the name it was started with
    GET  /v1/stats              requests, finish reasons, malformed tool calls, batch sizes
    POST /v1/chat/completions   non-streaming; tools, temperature, top_p, max_tokens
                                (or max_completion_tokens), seed, logprobs

Beyond OpenAI's fields, each choice carries ``token_ids`` (the completion as sampled) and
``prompt_token_ids`` (the rendered prompt), as vLLM returns them with
``return_token_ids``; they are always sent (clients that do not know them ignore them).
The rollout harness records them and the sampled log-probs into the trajectory.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .generate import DEFAULT_MAX_BATCH, Completion, Generator

DEFAULT_MAX_TOKENS = 256


class ChatServer:
    def __init__(
        self,
        folder: Path,
        *,
        model_name: str = "policy",
        host: str = "127.0.0.1",
        port: int = 0,
        device: str = "cpu",
        max_tokens_limit: int = 4096,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        self.generator = Generator(folder, device, max_batch=max_batch)
        self.model_name = model_name
        self.max_tokens_limit = max_tokens_limit
        self.requests = 0
        self.malformed_tool_calls = 0
        self.finish_reasons: dict[str, int] = {}
        self._count = threading.Lock()
        self.host = host
        self._http = ThreadingHTTPServer((host, port), _handler(self))
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        """The base URL on this machine (a server on every address is reached on loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> ChatServer:
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- the API ---------------------------------------------------------------------
    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: a non-empty list of chat messages is required")
        if body.get("stream"):
            raise BadRequest("stream: streaming is not supported by this server")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        max_tokens = int(max_tokens) if max_tokens is not None else DEFAULT_MAX_TOKENS
        if not 1 <= max_tokens <= self.max_tokens_limit:
            raise BadRequest(f"max_tokens: between 1 and {self.max_tokens_limit}")
        temperature = body.get("temperature")
        top_p = body.get("top_p")
        seed = body.get("seed")
        done = self.generator.complete(
            messages,
            tools=body.get("tools") or None,
            max_tokens=max_tokens,
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
            seed=None if seed is None else int(seed),
        )
        response = self._response(done, want_logprobs=bool(body.get("logprobs")))
        finish = str(response["choices"][0]["finish_reason"])
        with self._count:
            self.requests += 1
            self.malformed_tool_calls += done.malformed_tool_calls
            self.finish_reasons[finish] = self.finish_reasons.get(finish, 0) + 1
        return response

    def stats(self) -> dict[str, Any]:
        """What was served: requests, finish reasons, malformed tool calls, batching."""
        generator = self.generator
        return {
            "requests": self.requests,
            "finish_reasons": dict(self.finish_reasons),
            "malformed_tool_calls": self.malformed_tool_calls,
            "batches": generator.batches,
            "mean_batch": round(generator.batched_rows / generator.batches, 2)
            if generator.batches
            else 0.0,
            "largest_batch": generator.largest_batch,
        }

    def _response(self, done: Completion, *, want_logprobs: bool) -> dict[str, Any]:
        tokenizer = self.generator.tokenizer
        message: dict[str, Any] = {"role": "assistant", "content": done.text}
        finish = done.finish_reason
        if done.tool_calls:
            message["tool_calls"] = done.tool_calls
            if finish == "stop":  # a reply cut off by max_tokens stays "length"
                finish = "tool_calls"
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish,
            "logprobs": None,
            "token_ids": done.completion_ids,
            "prompt_token_ids": done.prompt_ids,
        }
        if want_logprobs:
            choice["logprobs"] = {
                "content": [
                    {
                        "token": tokenizer.convert_ids_to_tokens(token),
                        "logprob": logprob,
                        "bytes": list(str(tokenizer.decode([token])).encode()),
                        "top_logprobs": [],
                    }
                    for token, logprob in zip(done.completion_ids, done.logprobs, strict=True)
                ]
            }
        prompt, completion = len(done.prompt_ids), len(done.completion_ids)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.model_name, "object": "model", "owned_by": "cowork-gym"}],
        }


class BadRequest(ValueError):
    pass


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and pods
            return

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, server.models())
            elif self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send(200, {"status": "ok"})
            elif self.path.rstrip("/") == "/v1/stats":
                self._send(200, server.stats())
            else:
                self._send(404, _error(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, _error(f"no route {self.path}", "not_found"))
                return
            try:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                self._send(200, server.complete(body))
            except (BadRequest, ValueError, TypeError) as exc:
                self._send(400, _error(str(exc), "invalid_request_error"))
            except Exception as exc:  # the model failed: the client may retry
                self._send(500, _error(f"{type(exc).__name__}: {exc}", "server_error"))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


__all__ = ["BadRequest", "ChatServer"]
