"""The TrainingRun's pure reconcile: observed state in, a plan out."""
