"""The TrainingRun API: pydantic models are the contract; the CRD is generated."""
