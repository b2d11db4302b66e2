"""The SynthesisCampaign's pure reconcile: observed children in, a plan out."""
