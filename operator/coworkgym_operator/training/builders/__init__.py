"""The TrainingRun's manifests: its Jobs, RayJob, rounds' serving and RolloutBatches."""
