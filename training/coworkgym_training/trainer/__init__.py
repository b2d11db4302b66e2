"""Ray Train runs of the objectives (SFT, GRPO, OPD): ``train(TrainConfig)``.

Modules: ``config`` (TrainConfig, the one source of truth), ``run`` (the driver: data,
Ray, TorchTrainer), ``loop`` (one worker's loop), ``data`` (examples and each step's
batch), ``distributed`` (gradient averaging, FSDP), ``checkpoint`` and ``store``
(checkpoints in a folder or on S3), ``metrics`` (JSONL and Prometheus), ``status``
(status.json), ``rounds`` (the on-policy loop: serve → roll out → train).

"""

from .config import Hyperparameters, Selection, TrainConfig
from .status import RunStatus, read_status

__all__ = ["Hyperparameters", "RunStatus", "Selection", "TrainConfig", "read_status"]
