"""The TrainingRun resource: post-train a model on trajectories, on the cluster.

``spec`` says what to train (objective, model, data, selection, hyperparameters), on what
(workers and GPUs per worker), where the checkpoints go, and the lifecycle fields users
know from KubeRay's RayJob (backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished,
suspend, shutdownAfterJobFinishes); with ``rounds`` > 1, how each on-policy round rolls
the current checkpoint out (``rollout``). ``status`` holds the conditions, the progress
(step of total, the round), the latest metrics, the last good checkpoint and one record
per on-policy round. The CRD is generated from these
models (``training/api/crd.py``); docs/training.md shows how to apply one. Field
descriptions are what ``kubectl explain trainingrun.spec`` shows.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

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
from coworkgym_operator.rollouts.api.types import (
    EnvironmentSelection,
    ResolvedEnvironment,
    Sampling,
)

TRAINING_KIND = "TrainingRun"
TRAINING_PLURAL = "trainingruns"
TRAINING_SINGULAR = "trainingrun"
TRAINING_SHORT_NAME = "tr"
API_VERSION = f"{GROUP}/{VERSION}"

OBJECTIVES = ("sft", "grpo", "opd")
ON_POLICY = ("grpo", "opd")
SELECTION_METHODS = ("nll", "rsr", "none")
MAX_WORKERS = 256
MAX_ROUNDS = 100

# Messages shared by the models and the CRD's CEL rules (the API server and the operator
# say the same thing, naming the field).
ONE_DATA_SOURCE = (
    "spec.data needs exactly one of rolloutBatch (a RolloutBatch of this namespace) or uri "
    "(an s3:// dataset of trajectory JSONL)"
)
DATA_NOT_S3 = "spec.data.uri must be an s3:// URI of a .jsonl file or a prefix of them"
MODEL_URI = (
    "spec.model must be an s3:// URI or an absolute path (a Hugging Face model folder the "
    "training pod can read)"
)
OUTPUT_NOT_S3 = "spec.output.uri must be an s3:// URI (s3://bucket/prefix) for the checkpoints"
OPD_NEEDS_TEACHER = "spec.teacher is required when spec.objective is opd (the teacher model)"
ROUNDS_NEED_ROLLOUT = (
    "spec.rounds > 1 needs spec.rollout (how each round rolls the current checkpoint out) "
    "and an on-policy objective (grpo or opd)"
)
DATA_REQUIRED = (
    "spec.data is required when spec.rounds is 1 (a RolloutBatch reference or an s3:// "
    "dataset to train on)"
)
DATA_WITH_ROUNDS = (
    "spec.data is not read when spec.rounds > 1: each round trains on its own rollouts of "
    "spec.rollout.environments; remove spec.data"
)
BATCH_BELOW_WORKERS = (
    "spec.hyperparameters.batchSize must be at least spec.resources.workers (every worker "
    "needs one sequence per step)"
)
SPEC_FROZEN = (
    "spec is immutable once the run exists, except suspend, activeDeadlineSeconds and "
    "ttlSecondsAfterFinished; create a new TrainingRun for other data, model or settings"
)


def _model_location(value: str) -> bool:
    return value.startswith(("s3://", "/"))


class RolloutBatchReference(_Spec):
    """A RolloutBatch of this namespace whose trajectories are the data."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The RolloutBatch's name. The run waits (DataReady Unknown) until it is "
        "Complete, and fails if the batch failed.",
    )
    trajectories: Literal["kept", "all"] = Field(
        "kept",
        description="kept: what the batch's filter kept (kept.jsonl); all: every trajectory "
        "(trajectories.jsonl).",
    )


class DataSource(_Spec):
    """Where the trajectories come from: exactly one of rolloutBatch or uri."""

    rollout_batch: RolloutBatchReference | None = Field(
        None, description="A RolloutBatch of this namespace; its output is the data."
    )
    uri: str | None = Field(
        None,
        max_length=1024,
        description="An s3:// dataset: one trajectory .jsonl file, or a prefix holding "
        "them. The run checks it exists before training starts.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> DataSource:
        if (self.rollout_batch is None) == (self.uri is None):
            raise ValueError(ONE_DATA_SOURCE)
        if self.uri is not None and not self.uri.startswith("s3://"):
            raise ValueError(DATA_NOT_S3)
        return self


class Selection(_Spec):
    """Model-conditioned trajectory selection before training (as `cowork-gym select`)."""

    method: Literal["nll", "rsr", "none"] = Field(
        "none",
        description="nll: keep the central fraction of each length bin by the student's "
        "mean NLL on agent tokens; rsr: keep the lowest rank-sum ratio; none: train on all.",
    )
    keep: float = Field(
        0.7, gt=0, le=1, description="The fraction of each length bin kept (paper: 0.7)."
    )
    bins: int = Field(5, ge=1, le=100, description="Equal-frequency length bins.")


class Hyperparameters(_Spec):
    """The optimizer and objective settings; unset fields are the trainer's defaults."""

    learning_rate: float = Field(1e-5, gt=0, le=1, description="Peak learning rate (AdamW).")
    epochs: int = Field(1, ge=1, le=1000, description="Passes over the data.")
    max_steps: int | None = Field(
        None,
        ge=1,
        description="Optimizer steps in all (a resumed run counts on); with rounds, the "
        "steps of each round. Unset: the epochs' worth, ceil(trajectories × selection.keep "
        "× epochs / batchSize), counted by the pod (each round's, on its own rollouts).",
    )
    batch_size: int = Field(
        8, ge=1, le=65536, description="Sequences per optimizer step, summed over the workers."
    )
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    seed: int = Field(0, ge=0, description="Seed of data order and initialisation.")
    checkpoint_every: int = Field(10, ge=1, description="Steps between checkpoints.")
    clip_epsilon: float | None = Field(
        None, gt=0, lt=1, description="GRPO: the policy-ratio clip ε (unset: the trainer's 0.2)."
    )
    kl_coefficient: float | None = Field(
        None, ge=0, description="GRPO: weight of the KL to the reference (unset: no KL)."
    )
    top_k: int | None = Field(
        None, ge=1, le=65536, description="OPD: the teacher's top-k support (unset: full)."
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute each layer's activations in the backward pass instead of "
        "keeping them: far less memory for long trajectories, about a third more compute.",
    )


class Resources(_Spec):
    """What the run trains on: N workers, each with its GPUs, CPU and memory."""

    workers: int = Field(
        1,
        ge=1,
        le=MAX_WORKERS,
        description="Training workers (Ray Train). On a RayJob each is a Ray worker pod; "
        "on the plain Job they share one pod on one node.",
    )
    gpus_per_worker: int = Field(
        0, ge=0, le=16, description="nvidia.com/gpu per worker; 0 trains on CPU (gloo)."
    )
    cpu_per_worker: str | None = Field(
        None,
        max_length=32,
        pattern=r"^[0-9]+(\.[0-9]+)?m?$",
        description="CPU per worker, e.g. 4 or 500m; unset = the operator's default "
        "(Helm value training.resources.cpu).",
    )
    memory_per_worker: str | None = Field(
        None,
        max_length=32,
        pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti)?$",
        description="Memory per worker, e.g. 16Gi; unset = the operator's default "
        "(Helm value training.resources.memory).",
    )


class RoundRollout(_Spec):
    """How each round of an on-policy run rolls the current checkpoint out (rounds > 1)."""

    environments: EnvironmentSelection = Field(description="Which environments each round.")
    harness: Literal["mini-swe-agent", "openai-agents", "shell-patch", "tool-calling"] = Field(
        "tool-calling", description="How the served checkpoint is driven."
    )
    samples_per_environment: int = Field(
        4, ge=1, le=1024, description="Rollouts per environment each round (the group size)."
    )
    sampling: Sampling = Field(default_factory=Sampling, description="Sampling settings.")
    concurrency: int = Field(
        4, ge=1, le=512, description="Most rollouts at once (the round's RolloutBatch's)."
    )
    trajectories: Literal["kept", "all"] = Field(
        "kept",
        description="What each round trains on: kept, what the RolloutBatch's filter kept "
        "(kept.jsonl; it drops, among others, rollouts that ended on a budget); all, every "
        "trajectory (trajectories.jsonl; the trainer skips those without a valid reward).",
    )


class Output(S3Output):
    """Where the checkpoints and the metrics log go."""

    NOT_S3: ClassVar[str] = OUTPUT_NOT_S3
    uri: str = Field(
        max_length=1024,
        description="An s3:// prefix: checkpoints/step-<n>/ per checkpoint (and "
        "checkpoints/latest.json), then the run's config.json, metrics.jsonl and "
        "status.json. A restarted or resumed run continues from the latest checkpoint there. "
        "With rounds: checkpoints/round-<r>/step-<n>/ per round, the round's rollouts "
        "under rounds/round-<r>/ and its training's logs under rounds/round-<r>/train/.",
    )


class TrainingRunSpec(_Spec):
    """One training run: objective, model, data, settings, and its lifecycle."""

    objective: Literal["sft", "grpo", "opd"] = Field(
        description="sft: supervised fine-tuning on agent tokens; grpo: group-relative "
        "policy optimisation on the trajectories' rewards; opd: on-policy distillation "
        "from spec.teacher."
    )
    model: str = Field(
        min_length=1,
        max_length=1024,
        description="The policy's starting weights: an s3:// URI or an absolute path in "
        "the training image (a Hugging Face model folder with its tokenizer).",
    )
    teacher: str | None = Field(
        None,
        max_length=1024,
        description="opd only: the teacher's weights (s3:// URI or absolute path).",
    )
    data: DataSource | None = Field(
        None,
        description="Where the trajectories come from (rounds = 1; required then). An "
        "on-policy run (rounds > 1) trains on each round's own rollouts and has none.",
    )
    selection: Selection = Field(
        default_factory=Selection, description="Which trajectories are trained on."
    )
    hyperparameters: Hyperparameters = Field(
        default_factory=Hyperparameters, description="Optimizer and objective settings."
    )
    resources: Resources = Field(
        default_factory=Resources, description="Workers and what each one gets."
    )
    rounds: int = Field(
        1,
        ge=1,
        le=MAX_ROUNDS,
        description="On-policy rounds (grpo, opd). The operator drives each round r "
        "(from 0) with cluster objects: a Deployment and Service <run>-serve-r<r> serve the "
        "current checkpoint (spec.model in round 0), a RolloutBatch <run>-rollouts-r<r> "
        "rolls it out on spec.rollout.environments, then a Job <run>-train-r<r> trains on "
        "that batch's trajectories from the same checkpoint and saves "
        "checkpoints/round-<r>/, which the next round serves. More than 1 needs "
        "spec.rollout, no spec.data.",
    )
    rollout: RoundRollout | None = Field(
        None, description="How each round rolls out (rounds > 1 only)."
    )
    output: Output = Field(description="Where the checkpoints go.")
    image: str | None = Field(
        None,
        max_length=512,
        description="The training image; unset = the operator's (Helm value training.image).",
    )
    backoff_limit: int = Field(
        0,
        ge=0,
        le=100,
        description="Retries after a failed training pod (or RayJob submission), each "
        "resuming from the last checkpoint; as a Job's and a RayJob's backoffLimit.",
    )
    active_deadline_seconds: int | None = Field(
        None,
        ge=60,
        description="Wall-clock limit of one start of the training, its retries included "
        "(a resume after suspend starts the clock again; with rounds, each round's training "
        "Job); past it the run fails (reason DeadlineExceeded). Unset = none.",
    )
    ttl_seconds_after_finished: int | None = Field(
        None,
        ge=0,
        description="Delete the finished Job (or RayJob) and its pods this many seconds "
        "after it ends; the TrainingRun and its status stay. Unset = the operator's.",
    )
    suspend: bool = Field(
        False,
        description="true stops the training (its pods are deleted) and keeps the run; "
        "false again resumes it from the last checkpoint. With rounds, the round's server "
        "and training Job are deleted; its RolloutBatch, which the operator may not delete, "
        "ends early against the server that is gone, and on resume the round serves and "
        "rolls out again (a new RolloutBatch) or trains on (a new Job, from the round's "
        "checkpoints).",
    )
    shutdown_after_job_finishes: bool = Field(
        True,
        description="RayJob only: delete the RayCluster once the training ends (a plain Job's "
        "pod always ends with it).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrainingRunSpec:
        if not _model_location(self.model):
            raise ValueError(MODEL_URI)
        if self.objective == "opd" and not self.teacher:
            raise ValueError(OPD_NEEDS_TEACHER)
        if self.rounds > 1 and (self.rollout is None or self.objective not in ON_POLICY):
            raise ValueError(ROUNDS_NEED_ROLLOUT)
        if self.rounds == 1 and self.data is None:
            raise ValueError(DATA_REQUIRED)
        if self.rounds > 1 and self.data is not None:
            raise ValueError(DATA_WITH_ROUNDS)
        if self.hyperparameters.batch_size < self.resources.workers:
            raise ValueError(BATCH_BELOW_WORKERS)
        return self


# ---- status ------------------------------------------------------------------------------
class Progress(_Status):
    """How far the training is, as the trainer last reported it."""

    step: int = Field(0, ge=0, description="Optimizer steps done.")
    total_steps: int | None = Field(None, ge=0, description="Steps planned (once known).")
    epoch: float | None = Field(None, ge=0, description="Epochs done (fractional).")
    round: int | None = Field(
        None,
        ge=0,
        description="rounds > 1: the on-policy round running (or the last one, once "
        "ended), counted from 1; rounds finished earlier are not rerun after a resume.",
    )
    rounds: int | None = Field(None, ge=1, description="rounds > 1: the rounds planned.")
    summary: str = Field(
        "",
        description="step/total at a glance, e.g. 120/400 (with rounds: round 2/3 "
        "training, step 120/400, steps over all rounds), for kubectl get.",
    )
    last_report_time: str | None = Field(
        None,
        description="When the controller last saw the step advance, or (rounds > 1) a "
        "round take its next step (RFC 3339).",
    )


RoundStep = Literal["serve", "rollout", "train", "trained", "skipped"]


class RoundStatus(_Status):
    """One on-policy round (rounds > 1), as the operator drives it: serve → rollout →
    train → trained (or skipped: nothing to train on, the next round serves the same
    checkpoint). Kept after the round, so a finished round is never rerun."""

    round: int = Field(ge=0, description="The round, counted from 0 (as checkpoints/round-<r>/).")
    step: RoundStep = Field(
        "serve",
        description="serve (the checkpoint's server starting), rollout (the RolloutBatch "
        "runs against it), train (the training Job), trained, skipped.",
    )
    served: str = Field(
        description="The weights the round serves and trains from: spec.model in round 0, "
        "else the last trained round's checkpoint."
    )
    attempt: int = Field(
        1,
        ge=1,
        description="How many times the round's rollouts or training started: a resume "
        "after suspend starts them again under new names (…-<attempt>).",
    )
    suspended: bool = Field(False, description="spec.suspend stopped the round's pods.")
    endpoint: str | None = Field(
        None, description="The served checkpoint's OpenAI base URL the RolloutBatch used."
    )
    batch: str | None = Field(None, description="The round's RolloutBatch.")
    trajectories: int | None = Field(
        None, ge=0, description="Trajectories the RolloutBatch made (valid or not)."
    )
    kept: int | None = Field(None, ge=0, description="Of those, kept by its filter.")
    data_uri: str | None = Field(None, description="What the round trained on.")
    job_name: str | None = Field(None, description="The round's training Job.")
    steps: int | None = Field(None, ge=0, description="Optimizer steps the round trained.")
    total_steps: int | None = Field(None, ge=0, description="Steps its training planned.")
    checkpoint_uri: str | None = Field(None, description="The round's last checkpoint.")
    message: str = Field("", description="Why the round was skipped, when it was.")


class TrainingRunStatus(Status):
    """Written once per reconcile by the controller; never edited by users."""

    step: Literal["data", "train", "done"] = Field(
        "data",
        description="Where the run is: data (waiting for the trajectories), train, done.",
    )
    backend: Literal["Job", "RayJob"] | None = Field(
        None,
        description="What runs the training: RayJob where KubeRay's CRD is installed, else a "
        "plain Job on one node. Chosen once, when the training starts.",
    )
    job_name: str | None = Field(
        None, description="The Job or RayJob running the training (with rounds: the round's)."
    )
    starts: int = Field(0, ge=0, description="Times the training was started (resumes count).")
    data_uri: str | None = Field(
        None,
        description="The trajectories trained on (resolved from spec.data); with rounds, "
        "the manifest of spec.rollout.environments.manifestUri, if that is the selection.",
    )
    environments: list[ResolvedEnvironment] | None = Field(
        None,
        description="rounds > 1 with names or a selector: the released environments every "
        "round rolls out on, resolved once, when the run leaves the data step.",
    )
    rounds: list[RoundStatus] = Field(
        default_factory=list,
        description="rounds > 1: one record per round started, in order (the last one is "
        "the round running, or the last one once the run ended).",
    )
    progress: Progress = Field(default_factory=Progress, description="Step of total.")
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="The trainer's latest metrics (loss, tokens_per_s, grad_norm, "
        "reward_mean, groups_kept, ...); finite values only.",
    )
    checkpoint_uri: str | None = Field(
        None, description="The last good checkpoint (kept when the run fails)."
    )
    start_time: str | None = Field(None, description="When the training first started.")
    completion_time: str | None = Field(None, description="When the run succeeded or failed.")
    message: str = message_field()


TrainingRun = resource(TRAINING_KIND, TrainingRunSpec, TrainingRunStatus)


__all__ = [
    "API_VERSION",
    "OBJECTIVES",
    "TRAINING_KIND",
    "TRAINING_PLURAL",
    "TRAINING_SHORT_NAME",
    "TRAINING_SINGULAR",
    "DataSource",
    "Hyperparameters",
    "Output",
    "Progress",
    "Resources",
    "RolloutBatchReference",
    "RoundRollout",
    "RoundStatus",
    "RoundStep",
    "Selection",
    "TrainingRun",
    "TrainingRunSpec",
    "TrainingRunStatus",
]
