"""toolhost-sandbox: ``sandbox.run_command``, one shell command in the run's workspace inside
bubblewrap isolation (README.md; D103-D116). The entry point names ``toolhost_sandbox.plugin``."""
