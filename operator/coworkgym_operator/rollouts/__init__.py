"""RolloutBatch: rollouts of policies against released environments."""
