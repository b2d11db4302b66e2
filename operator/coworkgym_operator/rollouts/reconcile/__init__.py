"""The RolloutBatch's pure reconcile: observed state in, a plan out."""
