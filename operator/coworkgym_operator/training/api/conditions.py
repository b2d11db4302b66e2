"""TrainingRun condition types and reasons: the status contract. The phase is derived from
them (reconcile/training_conditions.py).

Every condition is always present, with a reason and a message, and the generation it was
computed from.

- DataReady   the trajectories are there: the referenced RolloutBatch is Complete and
              succeeded, or the s3:// dataset exists; with rounds > 1, the environments
              each round rolls out on are resolved (every named one Released, or a
              manifest given)
              (Unknown: WaitingForBatch, CheckingDataset, WaitingForEnvironments;
              True: BatchComplete, DatasetFound, EnvironmentsResolved; False:
              BatchNotFound, BatchFailed, DatasetNotFound, DataCheckFailed,
              EnvironmentsNotReleased, NotReached)
- Running     the training Job (or RayJob) is running now; with rounds > 1, the round's
              server, RolloutBatch or training Job
              (Unknown: Starting, the pod (a round's server or training pod) is not
              running yet; PodPending, it cannot start yet and the message says why, in
              Kubernetes' words (e.g. Unschedulable: 0/1 nodes are available: 1
              Insufficient cpu), and until when it is waited for (a pod the scheduler
              cannot place: training.schedulingDeadlineSeconds after its Job was made;
              one the kubelet cannot start: operator.stageStartGraceSeconds), after which
              the run fails PodCannotStart (a round's server: ServingFailed); True:
              Training, RollingOut (a round's RolloutBatch runs against its server);
              False: Waiting, Suspended, Finished, NotReached)
- Succeeded   the training ended and its checkpoint is in spec.output
              (False: InProgress, Failed; True: Succeeded)
- Failed      the run stopped without its checkpoint, whichever step: True with
              InvalidSpec, BatchNotFound, BatchFailed, DatasetNotFound, DataCheckFailed,
              PodCannotStart, NaNLoss, NoExamples (the data gave nothing to train on),
              BackoffLimitExceeded, DeadlineExceeded, TrainerFailed,
              EnvironmentsNotReleased; with rounds > 1 also ServingFailed (a round's
              server cannot start or keeps exiting) and BatchFailed (a round's
              RolloutBatch failed), and NoExamples when no round had anything to train on;
              the message names the round and the object that failed
              (False: InProgress, Succeeded)
- Complete    the run reached its outcome, whichever: True with Succeeded or Failed, so
              that ``kubectl wait --for=condition=Complete`` returns for every outcome, as
              for the other kinds (False: InProgress)
"""

from __future__ import annotations

from enum import StrEnum


class TrainingCondition(StrEnum):
    DATA_READY = "DataReady"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    COMPLETE = "Complete"


class TrainingReason(StrEnum):
    WAITING = "Waiting"
    NOT_REACHED = "NotReached"
    IN_PROGRESS = "InProgress"
    WAITING_FOR_BATCH = "WaitingForBatch"
    CHECKING_DATASET = "CheckingDataset"
    BATCH_COMPLETE = "BatchComplete"
    DATASET_FOUND = "DatasetFound"
    BATCH_NOT_FOUND = "BatchNotFound"
    BATCH_FAILED = "BatchFailed"
    DATASET_NOT_FOUND = "DatasetNotFound"
    DATA_CHECK_FAILED = "DataCheckFailed"
    STARTING = "Starting"
    POD_PENDING = "PodPending"
    TRAINING = "Training"
    ROLLING_OUT = "RollingOut"
    SUSPENDED = "Suspended"
    FINISHED = "Finished"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INVALID_SPEC = "InvalidSpec"
    POD_CANNOT_START = "PodCannotStart"
    NAN_LOSS = "NaNLoss"
    NO_EXAMPLES = "NoExamples"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    TRAINER_FAILED = "TrainerFailed"
    SERVING_FAILED = "ServingFailed"
    WAITING_FOR_ENVIRONMENTS = "WaitingForEnvironments"
    ENVIRONMENTS_RESOLVED = "EnvironmentsResolved"
    ENVIRONMENTS_NOT_RELEASED = "EnvironmentsNotReleased"


class TrainingPhase(StrEnum):
    PENDING = "Pending"
    WAITING_FOR_DATA = "WaitingForData"
    STARTING = "Starting"
    POD_PENDING = "PodPending"
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
