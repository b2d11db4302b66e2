"""SynthesisCampaign: many CoworkEnvironments planned from quotas."""
