"""The Cowork-Gym Kubernetes operator (kopf): drives the core loop with Jobs."""
