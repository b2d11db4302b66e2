"""TrainingRun: SFT/GRPO training on rollouts, in rounds."""
