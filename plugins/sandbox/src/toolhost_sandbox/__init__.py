"""toolhost-sandbox: ``sandbox.run_command``, one shell command in the run's workspace inside
bubblewrap isolation (DESIGN.md 8.2). The entry point names ``toolhost_sandbox.plugin``."""
