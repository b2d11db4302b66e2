"""The RolloutBatch API: pydantic models are the contract; the CRD is generated."""
