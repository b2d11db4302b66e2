"""RolloutBatch condition types and reasons: the status contract. The phase is derived from
them (reconcile/batch_conditions.py).

Every condition is always present, with a reason and a message. ``Unknown`` means the step
runs now; ``True`` that it is done; ``False`` says why not (Waiting: an earlier step has not
finished; NotReached: the batch ended before this step).

- Resolved            the environments are known and frozen in status.environments
                      (Resolving, Resolved, NoEnvironments, EnvironmentsNotReleased)
- EndpointsReachable  every model policy's endpoint answered the operator's probe
                      (Probing, Reachable, EndpointUnreachable, NoGateway)
- Fetched             the packages are on the batch volume (Fetching, Fetched, FetchFailed)
- RolledOut           every rollout has an outcome: verified, or invalid with its reason
                      (Running, RolledOut)
- Collected           trajectories filtered and in the output store
                      (Collecting, Collected, CollectFailed)
- Failed              the batch stopped without its trajectories (True: InvalidSpec,
                      NoEnvironments, EnvironmentsNotReleased, EndpointUnreachable,
                      NoGateway, FetchFailed, CollectFailed; False: InProgress, Succeeded)
- Complete            the batch reached its outcome, whichever: True with reason
                      Succeeded or Failed, so that ``kubectl wait --for=condition=Complete``
                      returns for every outcome, as for CoworkEnvironments (False: InProgress)

Invalid rollouts do not fail a batch: they are counted, with their reasons, and the batch
goes on.
"""

from __future__ import annotations

from enum import StrEnum


class BatchCondition(StrEnum):
    RESOLVED = "Resolved"
    ENDPOINTS_REACHABLE = "EndpointsReachable"
    FETCHED = "Fetched"
    ROLLED_OUT = "RolledOut"
    COLLECTED = "Collected"
    FAILED = "Failed"
    COMPLETE = "Complete"


class BatchReason(StrEnum):
    WAITING = "Waiting"
    NOT_REACHED = "NotReached"
    IN_PROGRESS = "InProgress"
    RESOLVING = "Resolving"
    RESOLVED = "Resolved"
    NO_ENVIRONMENTS = "NoEnvironments"
    ENVIRONMENTS_NOT_RELEASED = "EnvironmentsNotReleased"
    PROBING = "Probing"
    REACHABLE = "Reachable"
    ENDPOINT_UNREACHABLE = "EndpointUnreachable"
    NO_GATEWAY = "NoGateway"
    FETCHING = "Fetching"
    FETCHED = "Fetched"
    FETCH_FAILED = "FetchFailed"
    RUNNING = "Running"
    ROLLED_OUT = "RolledOut"
    COLLECTING = "Collecting"
    COLLECTED = "Collected"
    COLLECT_FAILED = "CollectFailed"
    INVALID_SPEC = "InvalidSpec"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class BatchPhase(StrEnum):
    PENDING = "Pending"
    FETCHING = "Fetching"
    RUNNING = "Running"
    COLLECTING = "Collecting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
