"""CoworkEnvironment: the build → execute → revise loop run as stage Jobs."""
