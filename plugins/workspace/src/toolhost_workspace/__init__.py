"""toolhost-workspace: the ``workspace`` domain (read_text, write_text, list_files).

Three text tools over the run's WorkspaceHandle. None of them resolves, joins, normalizes or
opens a path: each hands the caller's string to ``context.workspace`` and lets the host's
handle do containment (hard gate 10). Importing this package builds nothing; the host reaches
the tools through ``toolhost_workspace.plugin``.
"""

__all__: list[str] = []
