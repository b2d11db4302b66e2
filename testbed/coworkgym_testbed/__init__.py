"""Local Kubernetes + S3 test-bed built from Go modules."""
