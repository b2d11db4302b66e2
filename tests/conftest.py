# The Kubernetes/S3 test-bed: --testbed option, `testbed` marker handling and fixtures.
pytest_plugins = ["coworkgym_testbed.pytest_plugin"]
