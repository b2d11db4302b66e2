"""The checkpoint server: OpenAI's chat-completions shape over real HTTP (the openai
client), the completion's token ids, the rendered prompt's ids and log-probs that are the
served model's own, Hermes-style tool calls, and refusals of what it does not do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

import httpx
import openai
import torch

from coworkgym_training.serving import ChatServer, parse_tool_calls
from tests.training import builders

MESSAGES = [
    {"role": "system", "content": "You are a careful analyst."},
    {"role": "user", "content": "Summarise data/sales.csv into out/report.xlsx."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "data/sales.csv"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "region,sales\nnorth,10\n"},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatServer]:
    folder = builders.saved_student(tmp_path_factory.mktemp("served"))
    with ChatServer(folder, model_name="tiny") as running:
        yield running


def client(server: ChatServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url, api_key="EMPTY", http_client=openai.DefaultHttpxClient(trust_env=False)
    )


def test_a_completion_carries_the_models_own_tokens_and_logprobs(server: ChatServer) -> None:
    with client(server) as api:
        reply = api.chat.completions.create(
            model="tiny",
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=6,
            temperature=0.8,
            seed=11,
            logprobs=True,
            extra_body={"return_token_ids": True},
        )
        again = api.chat.completions.create(
            model="tiny",
            messages=MESSAGES,
            max_tokens=6,
            temperature=0.8,
            seed=11,  # type: ignore[arg-type]
        )
    choice = reply.choices[0]
    extra = choice.model_extra or {}
    prompt, completion = extra["prompt_token_ids"], extra["token_ids"]
    assert len(completion) == 6 and choice.finish_reason == "length"
    assert reply.usage is not None and reply.usage.prompt_tokens == len(prompt)
    assert (again.choices[0].model_extra or {})["token_ids"] == completion  # same seed, same draw
    # the prompt is the chat template's rendering (the tool call's arguments as JSON)
    tokenizer = server.generator.tokenizer
    assert '"path": "data/sales.csv"' in tokenizer.decode(prompt)
    # each log-prob is the served model's, at the request's temperature
    model = server.generator.model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    expected = torch.log_softmax(logits / 0.8, -1)
    assert choice.logprobs is not None and choice.logprobs.content is not None
    got = [item.logprob for item in choice.logprobs.content]
    want = [float(expected[len(prompt) - 1 + i, t]) for i, t in enumerate(completion)]
    assert got == pytest.approx(want, abs=1e-4)


def test_models_lists_the_served_name_and_bad_requests_are_400(server: ChatServer) -> None:
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http:
        assert http.get("/models").json()["data"][0]["id"] == "tiny"
        assert http.post("/chat/completions", json={"messages": []}).status_code == 400
        streaming = http.post("/chat/completions", json={"messages": MESSAGES, "stream": True})
        assert streaming.status_code == 400 and "stream" in streaming.json()["error"]["message"]
        assert http.post("/chat/completions", content=b"[1]").status_code == 400
        assert http.get("/nowhere").status_code == 404


def test_hermes_tool_call_blocks_become_tool_calls() -> None:
    text = (
        'Reading it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.csv"}}\n'
        "</tool_call>\n<tool_call>{not json}</tool_call>"
    )
    content, calls, malformed = parse_tool_calls(text)
    assert [c["function"]["name"] for c in calls] == ["read_file", ""]
    assert calls[0]["function"]["arguments"] == '{"path": "a.csv"}'
    # the malformed block is a call the harness answers with an error, not content
    assert malformed == 1 and calls[1]["function"]["arguments"] == "{not json}"
    assert content == "Reading it."
    assert parse_tool_calls("plain") == ("plain", [], 0)


def test_malformed_and_unclosed_blocks_keep_the_name_they_give() -> None:
    text = '<tool_call>{"name": "shell", "arguments": {"command": "ls"</tool_call>'
    _, calls, malformed = parse_tool_calls(text)
    assert malformed == 1 and calls[0]["function"]["name"] == "shell"
    cut = 'ok <tool_call>\n{"name": "write_file", "arguments": {"path": "a'  # max_tokens hit
    content, calls, malformed = parse_tool_calls(cut)
    assert (content, malformed, calls[0]["function"]["name"]) == ("ok", 1, "write_file")
    _, calls, malformed = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert malformed == 1 and calls[0]["function"]["name"] == ""


def test_the_server_listens_on_loopback_only(server: ChatServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert server._http.server_address[0] == "127.0.0.1"


def test_concurrent_requests_are_batched_and_sample_as_they_would_alone(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Left-padded rows of different lengths: each row's sampled tokens (same seed) and
    log-probs are the ones it gets when served alone; a row that stops early does not stop
    the others."""
    import threading

    from coworkgym_training.serving import Generator

    folder = builders.saved_student(tmp_path_factory.mktemp("batched"), seed=3)
    generator = Generator(folder, max_batch=4, gather_s=0.5)
    conversations = [
        MESSAGES[:2],
        MESSAGES,
        [{"role": "user", "content": "Hi."}],
        [MESSAGES[0], {"role": "user", "content": "The totals look wrong; check the sheet."}],
    ]
    limits = [5, 9, 3, 7]
    alone = [
        generator.complete(c, max_tokens=n, temperature=0.9, seed=i)
        for i, (c, n) in enumerate(zip(conversations, limits, strict=True))
    ]
    assert generator.largest_batch == 1
    together: list[object] = [None] * 4

    def ask(i: int) -> None:
        together[i] = generator.complete(
            conversations[i], max_tokens=limits[i], temperature=0.9, seed=i
        )

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert generator.largest_batch >= 2  # they did run together
    for solo, batched, limit in zip(alone, together, limits, strict=True):
        assert batched.completion_ids == solo.completion_ids  # type: ignore[attr-defined]
        assert batched.finish_reason == solo.finish_reason  # type: ignore[attr-defined]
        assert len(solo.completion_ids) <= limit
        assert torch.allclose(
            torch.tensor(batched.logprobs),
            torch.tensor(solo.logprobs),
            atol=1e-4,  # type: ignore[attr-defined]
        )
