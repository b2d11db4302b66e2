"""How a rollout harness names an endpoint's failure (the real openai client against the
scripted server on 127.0.0.1): the gateway's spent-budget answer is the policy's budget
(``budget_exhausted``: its work is still verified); a provider's own spent quota (429
``insufficient_quota``) is the endpoint failing (``model_error``: invalid, never scored —
the LLM-endpoint drill found it recorded as a verified reward 0)."""

from __future__ import annotations

import openai
import pytest

from coworkgym.rollout.adapters import endpoint_failure
from coworkgym.rollout.tool_calling import _model_error
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(30)


def refusal(code: str) -> openai.APIStatusError:
    """What the openai client raises for a 429 carrying error ``code``."""
    answer = {"status": 429, "body": {"error": {"message": f"no: {code}", "code": code}}}
    with (
        ScriptedServer.from_lanes({"default": [answer]}) as server,
        openai.OpenAI(base_url=server.url, api_key="k", max_retries=0) as client,
    ):
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.APIStatusError as exc:
            return exc
    raise AssertionError("the scripted 429 was answered 200")


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("budget_exhausted", "budget_exhausted"),  # the gateway: the rollout's own budget
        ("insufficient_quota", "model_error"),  # the provider's account
        ("rate_limit_exceeded", "model_error"),
    ],
)
def test_only_the_gateways_budget_answer_is_a_spent_budget(code: str, reason: str) -> None:
    error = refusal(code)
    for named in (_model_error(error), endpoint_failure(error, "litellm")):
        assert named.reason == reason
        assert "429" in named.detail and code in named.detail
