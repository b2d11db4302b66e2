"""The CoworkEnvironment's pure reconcile: observed state in, a plan out."""
