"""The RolloutBatch resource: policies rolled out over released environments on the cluster.

``spec`` says which environments, which policies, how many samples of each (the GRPO
group), how many rollouts at once, where the trajectories go and how they are filtered;
``status`` counts the rollouts, the pass rate per harness and the filter's funnel. The CRD
is generated from these models (``rollouts/api/crd.py``); docs/rollouts-on-kubernetes.md describes
the pods behind it. Field descriptions are what ``kubectl explain rolloutbatch.spec`` shows.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import (
    Field,
    model_validator,
)

from coworkgym.rollout.filters.settings import FilterSettings
from coworkgym.spec import SandboxSettings
from coworkgym_operator.core.api import (
    GROUP,
    VERSION,
    S3Output,
    Status,
    _Status,
    message_field,
    resource,
)
from coworkgym_operator.core.api import Spec as _Spec

BATCH_KIND = "RolloutBatch"
BATCH_PLURAL = "rolloutbatches"
BATCH_SINGULAR = "rolloutbatch"
BATCH_SHORT_NAME = "rb"
API_VERSION = f"{GROUP}/{VERSION}"

# The harnesses the rollout image registers (coworkgym.rollout.harness). A test checks
# this list against the registry, so a new harness shows up here (and in the CRD's enum).
HARNESSES = ("mini-swe-agent", "nop", "openai-agents", "oracle", "shell-patch", "tool-calling")
# Replays that call no model: they need no endpoint.
NO_MODEL_HARNESSES = ("nop", "oracle")
MAX_POLICIES = 16
MAX_SAMPLES = 1024
MAX_NAMES = 500

# Messages shared by the models and the CRD's CEL rules (the API server and the operator
# say the same thing).
ONE_SELECTION = (
    "spec.environments needs exactly one of selector, names or manifestUri "
    "(a label selector over Released CoworkEnvironments, a list of their names, or an "
    "s3:// manifest.jsonl)"
)
POLICY_NEEDS_ENDPOINT = (
    "a policy whose harness calls a model needs baseUrl (the OpenAI-compatible endpoint); "
    "only nop and oracle run without one"
)
OUTPUT_NOT_S3 = "spec.output.uri must be an s3:// URI (s3://bucket/prefix)"
MANIFEST_NOT_S3 = "spec.environments.manifestUri must be an s3:// URI of a manifest.jsonl"
SPEC_FROZEN = (
    "spec is immutable once the batch exists, except concurrency and filter; create a new "
    "RolloutBatch for other environments, policies, samples or output"
)


class LabelSelectorRequirement(_Spec):
    """One requirement of a label selector, as in every Kubernetes selector."""

    key: str = Field(max_length=317, description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="The values for In and NotIn; empty for Exists and DoesNotExist.",
    )


class LabelSelector(_Spec):
    """Labels of the CoworkEnvironments to roll out on (only Released ones are taken)."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels an environment must carry, all of them."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=16, description="Requirements on its labels, all of them."
    )

    def to_query(self) -> str:
        """The selector as the API's labelSelector query string."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for e in self.match_expressions:
            if e.operator == "Exists":
                parts.append(e.key)
            elif e.operator == "DoesNotExist":
                parts.append(f"!{e.key}")
            else:
                word = "in" if e.operator == "In" else "notin"
                parts.append(f"{e.key} {word} ({','.join(e.values)})")
        return ",".join(parts)


class EnvironmentSelection(_Spec):
    """Which environments the batch rolls out on: exactly one of the three. The choice is
    resolved once, when the batch starts (status.environments); environments released
    later do not join a running batch."""

    selector: LabelSelector | None = Field(
        None,
        description="A label selector over the namespace's CoworkEnvironments; those in "
        "phase Released are taken, in name order. An empty selector takes them all.",
    )
    names: list[str] | None = Field(
        None,
        min_length=1,
        max_length=MAX_NAMES,
        description="CoworkEnvironments of this namespace by name; each must be Released.",
    )
    manifest_uri: str | None = Field(
        None,
        max_length=1024,
        description="An s3:// manifest.jsonl (what `cowork-gym synth --out s3://...` "
        "writes): each record's location is a released package. Read by the fetch pod.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvironmentSelection:
        chosen = [v for v in (self.selector, self.names, self.manifest_uri) if v is not None]
        if len(chosen) != 1:
            raise ValueError(ONE_SELECTION)
        if self.manifest_uri is not None and not self.manifest_uri.startswith("s3://"):
            raise ValueError(MANIFEST_NOT_S3)
        return self


class Sampling(_Spec):
    """How the policy samples; unset fields are the endpoint's defaults."""

    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(None, ge=1, description="Most tokens per model reply.")
    seed: int | None = Field(
        None, description="A base seed; each sample adds its index, so samples differ."
    )
    max_steps: int = Field(60, ge=1, le=10_000, description="Most model calls per rollout.")


class Policy(_Spec):
    """One policy: a harness driving a model behind an OpenAI-compatible endpoint."""

    harness: Literal[
        "mini-swe-agent", "nop", "openai-agents", "oracle", "shell-patch", "tool-calling"
    ] = Field(
        description="How the model is driven: tool-calling (chat completions with the "
        "package's tools); shell-patch (a Codex-style shell and apply_patch interface over "
        "the package's shell); the third-party agents mini-swe-agent and openai-agents (their "
        "libraries must be in the sandbox image: the harnesses extra; without them the "
        "rollout is invalid, saying so); or the replays oracle (the reference solution, for "
        "smoke runs) and nop (does nothing; reward 0)."
    )
    model: str = Field(
        min_length=1, max_length=256, description="The model name the endpoint serves."
    )
    base_url: str | None = Field(
        None,
        max_length=1024,
        description="The endpoint's OpenAI base URL (e.g. http://vllm.models:8000/v1), "
        "as the LLM gateway reaches it; rollout pods reach only the gateway.",
    )
    api_key_secret: str | None = Field(
        None,
        max_length=253,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The name of the key, in the gateway's upstream-keys Secret (Helm value "
        "gateway.upstreamKeysSecret), that holds this endpoint's API key. Only the gateway "
        "reads it; rollout pods get a per-rollout gateway token. Unset: no key.",
    )
    sampling: Sampling = Field(default_factory=Sampling, description="Sampling settings.")

    @model_validator(mode="after")
    def _endpoint(self) -> Policy:
        if self.harness not in NO_MODEL_HARNESSES and not self.base_url:
            raise ValueError(POLICY_NEEDS_ENDPOINT)
        return self

    @property
    def label(self) -> str:
        return f"{self.harness}/{self.model}"


class Output(S3Output):
    """Where the trajectories go."""

    NOT_S3: ClassVar[str] = OUTPUT_NOT_S3
    uri: str = Field(
        max_length=1024,
        description="An s3:// prefix: rollouts/<id>.json per rollout, trajectories.jsonl "
        "(all, filtered or not), kept.jsonl (what the filter kept) and funnel.json.",
    )


class RolloutBatchSpec(_Spec):
    """Policies × environments × samples, rolled out in isolated pods."""

    environments: EnvironmentSelection = Field(description="Which environments.")
    policies: list[Policy] = Field(
        min_length=1, max_length=MAX_POLICIES, description="The policies to roll out."
    )
    samples_per_environment: int = Field(
        1,
        ge=1,
        le=MAX_SAMPLES,
        description="Rollouts per environment and policy (the GRPO group size).",
    )
    concurrency: int = Field(
        4, ge=1, le=512, description="Most rollouts (rollout or verify pods) running at once."
    )
    timeout_seconds: int | None = Field(
        None,
        ge=10,
        le=86_400,
        description="Wall-clock limit of one rollout; unset = the package's agent timeout.",
    )
    output: Output = Field(description="Where the trajectories go.")
    filter: FilterSettings = Field(
        default_factory=FilterSettings,
        description="What the filter keeps (as for `cowork-gym filter --settings`).",
    )
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings,
        description="How the batch's pods run; unset fields = the operator's settings.",
    )


# ---- status ------------------------------------------------------------------------------
class ResolvedEnvironment(_Status):
    """One environment of the batch, frozen when the batch started."""

    name: str = Field(description="The CoworkEnvironment (or the manifest's package name).")
    uri: str = Field(description="Where its released package is (s3://).")
    digest: str | None = Field(None, description="The released package's digest.")
    workdir: str | None = Field(
        None, description="The package's working directory (where the agent sees its files)."
    )


class Counts(_Status):
    """Rollouts by state. total = pending + running + succeeded + invalid."""

    total: int = Field(0, ge=0, description="Rollouts planned: environments × policies × samples.")
    pending: int = Field(0, ge=0, description="Not started yet.")
    running: int = Field(0, ge=0, description="In a rollout or verify pod now.")
    succeeded: int = Field(0, ge=0, description="Verified: a valid reward (0 or more).")
    invalid: int = Field(0, ge=0, description="Ended without a valid reward (reason recorded).")
    kept: int | None = Field(None, ge=0, description="Kept by the filter (once collected).")


class HarnessPassRate(_Status):
    """How one policy did."""

    policy: str = Field(description="harness/model.")
    finished: int = Field(0, ge=0, description="Rollouts finished.")
    valid: int = Field(0, ge=0, description="Of those, with a valid reward.")
    passed: int = Field(0, ge=0, description="Of those, reaching the pass threshold.")
    pass_rate: float | None = Field(
        None, description="passed / valid; unset until one is valid (invalid is not 0)."
    )


class FunnelStep(_Status):
    """One rule of the filter pipeline: what it dropped, by reason."""

    rule: str = Field(description="The rule (or 'readable').")
    dropped: int = Field(0, ge=0, description="Trajectories it dropped.")
    kept: int = Field(0, ge=0, description="Trajectories left after it.")
    reasons: dict[str, int] = Field(default_factory=dict, description="Reason → count.")


class RolloutBatchStatus(Status):
    """Written once per reconcile by the controller; never edited by users."""

    step: Literal["resolve", "probe", "fetch", "rollout", "collect", "done"] = Field(
        "resolve",
        description="Where the batch is: resolve (its environments), probe (its endpoints), "
        "fetch (the packages), rollout, collect (filter and upload), done.",
    )
    environments: list[ResolvedEnvironment] | None = Field(
        None, description="The environments, frozen at the start (unset until resolved)."
    )
    counts: Counts = Field(default_factory=Counts, description="Rollouts by state.")
    summary: str = Field(
        "", description="succeeded/invalid/total at a glance, e.g. 3/1/4, for kubectl get."
    )
    pass_rates: list[HarnessPassRate] = Field(
        default_factory=list, description="Per policy: finished, valid, passed, pass rate."
    )
    funnel: list[FunnelStep] = Field(
        default_factory=list, description="The filter's funnel, once collected."
    )
    outcomes: dict[str, str] = Field(
        default_factory=dict,
        description="Rollout id → its outcome: passed, failed (valid, below the "
        "threshold) or invalid: <reason>. Kept after the pods are gone.",
    )
    running: dict[str, str] = Field(
        default_factory=dict, description="Rollout id → the pod it is in now (rollout, verify)."
    )
    tokens: int = Field(0, ge=0, description="Model tokens used, all rollouts.")
    output_uri: str | None = Field(None, description="Where the trajectories are, once there.")
    message: str = message_field()


RolloutBatch = resource(BATCH_KIND, RolloutBatchSpec, RolloutBatchStatus)

__all__ = [
    "API_VERSION",
    "BATCH_KIND",
    "BATCH_PLURAL",
    "BATCH_SHORT_NAME",
    "BATCH_SINGULAR",
    "HARNESSES",
    "NO_MODEL_HARNESSES",
    "Counts",
    "EnvironmentSelection",
    "FunnelStep",
    "HarnessPassRate",
    "LabelSelector",
    "Output",
    "Policy",
    "ResolvedEnvironment",
    "RolloutBatchSpec",
    "RolloutBatchStatus",
    "Sampling",
]
