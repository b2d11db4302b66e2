"""Pure builders of a TrainingRun's children: the dataset check Job and the plain training
Job (one pod on one node; rayjob.py builds the KubeRay form). No I/O; every object carries
an owner reference and a deterministic name.

The training pod runs ``python -m coworkgym_operator.training.pod train``, which stages the
data and weights, runs ``cowork-gym train --config`` on the trainer's TrainConfig (built by
``train_config``: the one place the trainer's settings are spelled) and reports through its
log and termination message (training/pod.py says how).

With ``spec.rounds`` > 1 each on-policy round's training is the same Job, given a
``RoundTraining``: it starts from the weights the round served, trains on the round's
RolloutBatch output and checkpoints to ``checkpoints/round-<r>/`` (builders/rounds.py builds
the round's server and RolloutBatch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from coworkgym_operator.core.builders import (
    LABEL_EGRESS,
    LABEL_SANDBOX,
    Owner,
    child_name,
    container_security,
    sandbox_pod,
)
from coworkgym_operator.core.sharding import inherited
from coworkgym_operator.training.api.types import API_VERSION, TRAINING_KIND, TrainingRunSpec
from coworkgym_operator.training.settings import TrainingSettings

Manifest = dict[str, Any]
LABEL_TRAINING = "coworkgym.dev/trainingrun"
LABEL_STEP = "coworkgym.dev/step"  # check-data, train, serve (an on-policy round's server)
LABEL_ROUND = "coworkgym.dev/round"  # an on-policy round's children: the round, from 0
TRAIN_CONTAINER = "train"
EXIT_NO_RETRY = 3  # training/pod.py EXIT_NO_RETRY: NaN loss; the Job fails without a retry
PYTHON_MINOR = "3.12"


def train_job_name(run: str, start: int) -> str:
    """One Job per start: a resumed run gets a fresh Job (the old one may still be going)."""
    return child_name(run, f"train-{start}")


def round_suffix(what: str, index: int, attempt: int = 1) -> str:
    """``<what>-r<r>``, then ``-<attempt>`` from the round's second attempt on (a resume
    after suspend: the first attempt's objects may still be going)."""
    return f"{what}-r{index}" + (f"-{attempt}" if attempt > 1 else "")


def round_train_job_name(run: str, index: int, attempt: int = 1) -> str:
    return child_name(run, round_suffix("train", index, attempt))


def round_folder(output: str, index: int) -> str:
    """``<output>/rounds/round-<r>``: the round's rollouts and its training's logs."""
    return f"{output.rstrip('/')}/rounds/round-{index:03d}"


@dataclass(frozen=True)
class RoundTraining:
    """What one on-policy round trains: from ``model`` (the weights the round served:
    spec.model in round 0, else the last trained round's checkpoint), on ``data_uri``
    (the round's RolloutBatch output), checkpointing to checkpoints/round-<index>/."""

    index: int
    model: str
    data_uri: str
    attempt: int = 1


def check_job_name(run: str) -> str:
    return child_name(run, "check-data")


OWNER = Owner(API_VERSION, TRAINING_KIND, LABEL_TRAINING)


def data_uri_of_batch(output_uri: str, trajectories: str) -> str:
    """Where a RolloutBatch's trajectories are: kept.jsonl or trajectories.jsonl."""
    name = "kept.jsonl" if trajectories == "kept" else "trajectories.jsonl"
    return f"{output_uri.rstrip('/')}/{name}"


# ---- what the trainer is asked to do -------------------------------------------------------
# Where the pod stages what it reads, and where the trainer's run folder is (an emptyDir).
WORK = "/tmp/train"
CONFIG_FILE = f"{WORK}/config.json"


def train_config(spec: TrainingRunSpec, round_training: RoundTraining | None = None) -> Manifest:
    """The trainer's TrainConfig (coworkgym_training.trainer.config, its JSON form) for the
    run, or for one of its on-policy rounds. ``model``, ``teacher_model`` and ``data`` name
    the pod's local copies (the pod stages s3:// ones there first); ``max_steps`` is None
    when the run gives epochs (the pod counts the trajectories and fills it in)."""
    hp, res = spec.hyperparameters, spec.resources
    grpo: Manifest = {}
    if hp.clip_epsilon is not None:
        grpo["clip_epsilon_low"] = grpo["clip_epsilon_high"] = hp.clip_epsilon
    if hp.kl_coefficient is not None:
        grpo["kl_beta"] = hp.kl_coefficient
    options: Manifest = {}
    if grpo:
        options["grpo"] = grpo
    if hp.top_k is not None:
        options["opd"] = {"top_k": hp.top_k}
    checkpoint = f"{spec.output.uri.rstrip('/')}/checkpoints"
    if round_training is not None:  # the trainer resumes from the round's own checkpoints
        checkpoint += f"/round-{round_training.index:03d}"
    model = round_training.model if round_training is not None else spec.model
    config: Manifest = {
        "objective": spec.objective,
        "model": _local(model, "model"),
        "data": [f"{WORK}/data"],
        "out": f"{WORK}/out",
        "checkpoint": checkpoint,
        "hyperparameters": {
            "learning_rate": hp.learning_rate,
            "warmup_steps": hp.warmup_steps,
            "batch_size": hp.batch_size,
            "seed": hp.seed,
            "gradient_checkpointing": hp.gradient_checkpointing,
        },
        "objective_options": options,
        "max_steps": hp.max_steps,
        "checkpoint_every": hp.checkpoint_every,
        "workers": res.workers,
        "device": "cuda" if res.gpus_per_worker else "cpu",
    }
    if spec.selection.method != "none":
        config["selection"] = {
            "method": spec.selection.method,
            "keep": spec.selection.keep,
            "bins": spec.selection.bins,
        }
    if spec.teacher:
        config["teacher_model"] = _local(spec.teacher, "teacher")
    goes_on = round_training is not None and round_training.index > 0
    if goes_on and round_training is not None and round_training.model != spec.model:
        # A later round goes on from the last one: the KL reference stays the run's first
        # model, and AdamW's moments and the schedule come with the checkpoint's weights
        # (the pod stages its trainer_state.pt for this, training/pod.py: prepare).
        config["reference_model"] = _local(spec.model, "reference")
        config["optimizer_state_from"] = config["model"]
    return config


def _local(location: str, name: str) -> str:
    return f"{WORK}/{name}" if location.startswith("s3://") else location


def train_plan(
    spec: TrainingRunSpec,
    data_uri: str,
    settings: TrainingSettings,
    round_training: RoundTraining | None = None,
) -> Manifest:
    """What the pod's reporter does (training/pod.py: train): stage ``stage`` (s3:// URI →
    local folder), write ``config`` to CONFIG_FILE, run ``argv``, then copy the run's
    config, metrics log and status to ``output`` (an on-policy round's: its round folder's
    train/). The weights staged are the round's when ``round_training`` is given."""
    output = spec.output.uri.rstrip("/")
    model = spec.model
    if round_training is not None:
        output = f"{round_folder(output, round_training.index)}/train"
        model = round_training.model
    stage: dict[str, str] = {f"{WORK}/data": data_uri}
    goes_on = round_training is not None and round_training.index > 0 and model != spec.model
    reference = spec.model if goes_on else None
    for location, name in ((model, "model"), (spec.teacher, "teacher"), (reference, "reference")):
        if location and location.startswith("s3://"):
            stage[f"{WORK}/{name}"] = location
    keep = spec.selection.keep if spec.selection.method != "none" else 1.0
    return {
        "config": train_config(spec, round_training),
        "configFile": CONFIG_FILE,
        "stage": stage,
        "epochs": spec.hyperparameters.epochs,
        "keep": keep,
        "output": output,
        "argv": [*cli(settings), "train", "--config", CONFIG_FILE],
    }


def cli(settings: TrainingSettings) -> list[str]:
    """How a pod runs ``cowork-gym``."""
    if settings.host_checkout:  # the venv's console script names a host interpreter
        return ["python", "-c", "import sys; from coworkgym.cli import main; sys.exit(main())"]
    return ["cowork-gym"]


def pod_input(plan: Manifest) -> Manifest:
    return {"name": "COWORKGYM_POD_INPUT", "value": json.dumps(plan, separators=(",", ":"))}


def store_env(settings: TrainingSettings) -> tuple[list[Manifest], list[Manifest]]:
    """The object store's endpoint (env) and credentials (envFrom the chart's Secret)."""
    op = settings.operator
    env = [{"name": "COWORKGYM_S3_ENDPOINT", "value": op.s3_endpoint}] if op.s3_endpoint else []
    if op.s3_endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": op.s3_endpoint})
    return env, [{"secretRef": {"name": op.s3_secret}}] if op.s3_secret else []


def host_checkout(settings: TrainingSettings) -> tuple[list[Manifest], list[Manifest], Manifest]:
    """The test-bed shortcut's volume, mount and PYTHONPATH (nothing when it is off)."""
    path = settings.host_checkout
    if not path:
        return [], [], {}
    site = f"{path}/.venv/lib/python{PYTHON_MINOR}/site-packages"
    volume = {"name": "checkout", "hostPath": {"path": path, "type": "Directory"}}
    mount = {"name": "checkout", "mountPath": path, "readOnly": True}
    pythonpath = ":".join([path, f"{path}/operator", f"{path}/training", site])
    return [volume], [mount], {"name": "PYTHONPATH", "value": pythonpath}


def worker_resources(spec: TrainingRunSpec, settings: TrainingSettings, workers: int) -> Manifest:
    """Requests = limits for ``workers`` of the run's workers (GPUs in whole devices)."""
    cpu = _times(spec.resources.cpu_per_worker or settings.cpu, workers)
    memory = _times(spec.resources.memory_per_worker or settings.memory, workers)
    amounts: dict[str, str] = {"cpu": cpu, "memory": memory}
    if spec.resources.gpus_per_worker:
        amounts[settings.gpu_resource] = str(spec.resources.gpus_per_worker * workers)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _times(quantity: str, n: int) -> str:
    """n × a CPU or memory quantity, in the quantity's own unit (2Gi × 2 → 4Gi)."""
    if n == 1:
        return quantity
    number = quantity.rstrip("KMGTimkgt")
    unit = quantity[len(number) :]
    value = float(number) * n
    return f"{int(value) if value.is_integer() else value}{unit}"


def training_labels(run: Manifest, **more: str) -> dict[str, str]:
    """A training pod's labels (the plain Job's, a round's, a RayJob's head, workers and
    submitter): the run's shard and name, the train step, and the sandbox labels, so that
    the chart's sandbox NetworkPolicies and the run's own (builders/network.py) fence it:
    the run's other training pods, the object store, the cluster DNS, nothing else."""
    return {
        **inherited(run["metadata"].get("labels")),
        LABEL_TRAINING: run["metadata"]["name"],
        LABEL_STEP: "train",
        **more,
        LABEL_SANDBOX: "true",
        LABEL_EGRESS: "object-store",
    }


def training_pod_spec(
    settings: TrainingSettings,
    containers: list[Manifest],
    extra_volumes: list[Manifest],
    *,
    shm: bool = True,
) -> Manifest:
    """A training pod: the sandbox pod's hardening (non-root, no API token, no service
    links), on the training nodes (GPU node selector, tolerations, runtime class).
    ``shm``: a memory /dev/shm (data loaders, NCCL); a checkpoint server needs none."""
    memory_shm = {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}}
    volumes = [
        {"name": "tmp", "emptyDir": {"sizeLimit": "20Gi"}},
        *([memory_shm] if shm else []),
        *extra_volumes,
    ]
    pod = sandbox_pod(
        settings.operator.sandbox_service_account,
        containers,
        volumes,
        settings.operator.sandbox_defaults.model_copy(
            update={"runtime_class_name": None, "node_selector": {}, "tolerations": []}
        ),
    )
    if settings.runtime_class_name:
        pod["runtimeClassName"] = settings.runtime_class_name
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod["tolerations"] = [dict(t) for t in settings.tolerations]
    return pod


def trainer_container(
    name: str,
    spec: TrainingRunSpec,
    plan: Manifest,
    settings: TrainingSettings,
    resources: Manifest,
) -> Manifest:
    """A container of the training image (the plain Job's, a RayJob's head or worker):
    its ``plan`` as the pod's input, the object store's credentials, /tmp and /dev/shm,
    and the host checkout where the chart mounts one."""
    env, env_from = store_env(settings)
    _, mounts, pythonpath = host_checkout(settings)
    container: Manifest = {
        "name": name,
        "image": spec.image or settings.image,
        "imagePullPolicy": settings.operator.image_pull_policy,
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            pod_input(plan),
            *env,
            *([pythonpath] if pythonpath else []),
        ],
        "resources": resources,
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "shm", "mountPath": "/dev/shm"},
            *mounts,
        ],
    }
    if env_from:
        container["envFrom"] = env_from
    return container


def train_container(
    spec: TrainingRunSpec,
    data_uri: str,
    settings: TrainingSettings,
    workers: int,
    round_training: RoundTraining | None = None,
) -> Manifest:
    """The container that runs the trainer under training/pod.py's reporter."""
    plan = train_plan(spec, data_uri, settings, round_training)
    resources = worker_resources(spec, settings, workers)
    container = trainer_container(TRAIN_CONTAINER, spec, plan, settings, resources)
    container["command"] = ["python", "-m", "coworkgym_operator.training.pod", "train"]
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return container


def training_job(
    run: Manifest,
    spec: TrainingRunSpec,
    data_uri: str,
    start: int,
    settings: TrainingSettings,
    round_training: RoundTraining | None = None,
) -> Manifest:
    """The plain Job: one pod on one node running every worker (Ray Train on a local Ray);
    with ``round_training``, an on-policy round's (named for the round and its attempt,
    not ``start``). backoffLimit and activeDeadlineSeconds are the run's; a NaN loss (exit
    3) fails the Job at once through its podFailurePolicy instead of being retried."""
    name = run["metadata"]["name"]
    step_labels = {LABEL_STEP: "train"}
    job_name = train_job_name(name, start)
    if round_training is not None:
        step_labels[LABEL_ROUND] = str(round_training.index)
        job_name = round_train_job_name(name, round_training.index, round_training.attempt)
    labels = training_labels(run, **step_labels)
    volumes, _, _ = host_checkout(settings)
    container = train_container(spec, data_uri, settings, spec.resources.workers, round_training)
    pod = training_pod_spec(settings, [container], volumes)
    job_spec: Manifest = {
        "backoffLimit": spec.backoff_limit,
        "ttlSecondsAfterFinished": _ttl(spec, settings),
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": TRAIN_CONTAINER,
                        "operator": "In",
                        "values": [EXIT_NO_RETRY],
                    },
                }
            ]
        },
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    if spec.active_deadline_seconds:
        job_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": OWNER.metadata(run, job_name, **step_labels),
        "spec": job_spec,
    }


def _ttl(spec: TrainingRunSpec, settings: TrainingSettings) -> int:
    if spec.ttl_seconds_after_finished is not None:
        return spec.ttl_seconds_after_finished
    return settings.ttl_seconds_after_finished


def check_data_job(run: Manifest, uri: str, settings: TrainingSettings) -> Manifest:
    """Does the s3:// dataset exist? A small pod in the training image (the image the
    training pulls next anyway: boto3 and this package), the only one besides the training
    pod that holds storage credentials; a sandbox pod, so the chart's NetworkPolicies fence
    it to the object store."""
    name = run["metadata"]["name"]
    env, env_from = store_env(settings)
    volumes, mounts, pythonpath = host_checkout(settings)
    image = (run.get("spec") or {}).get("image") or settings.image
    container: Manifest = {
        "name": "check-data",
        "image": image,
        "imagePullPolicy": settings.operator.image_pull_policy,
        "command": ["python", "-m", "coworkgym_operator.training.pod", "check-data"],
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "COWORKGYM_POD_INPUT", "value": json.dumps({"uri": uri})},
            *env,
            *([pythonpath] if pythonpath else []),
        ],
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "securityContext": container_security(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts],
    }
    if env_from:
        container["envFrom"] = env_from
    labels = {
        **inherited(run["metadata"].get("labels")),
        LABEL_TRAINING: name,
        LABEL_STEP: "check-data",
        LABEL_SANDBOX: "true",
        LABEL_EGRESS: "object-store",
    }
    pod = sandbox_pod(
        settings.operator.sandbox_service_account,
        [container],
        [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}, *volumes],
        settings.operator.sandbox_defaults,
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": OWNER.metadata(run, check_job_name(name), **{LABEL_STEP: "check-data"}),
        "spec": {
            "backoffLimit": 2,  # a flaky store gets two more tries
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": settings.operator.job_ttl_seconds,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


__all__ = [
    "LABEL_ROUND",
    "LABEL_STEP",
    "LABEL_TRAINING",
    "RoundTraining",
    "check_data_job",
    "check_job_name",
    "cli",
    "data_uri_of_batch",
    "round_folder",
    "round_train_job_name",
    "train_config",
    "train_job_name",
    "train_plan",
    "training_job",
    "training_labels",
]
