# The Kubernetes/S3 test-bed: --testbed option, `testbed` marker handling and fixtures.
pytest_plugins = ["coworkgym_testbed.pytest_plugin"]

# Test files inside fixture packages (Harbor tasks' own tests/) belong to those tasks: they
# run inside the tasks' sandboxes, never in this suite.
collect_ignore_glob = ["fixtures/*"]
