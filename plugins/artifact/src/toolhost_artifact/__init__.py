"""toolhost-artifact: the ``artifact`` domain (artifact.export 1.0.0 and 2.0.0).

A workspace file, read through the run's Workspace port only, or text the model wrote, saved
into the run's artifacts for the owner. Importing this package builds nothing; the host reaches
the tools through ``toolhost_artifact.plugin``.
"""

__all__: list[str] = []
