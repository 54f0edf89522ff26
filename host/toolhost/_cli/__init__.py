"""The ``toolhost`` command: the operator's surface (``main``), the Milestone 1 demo, the catalog
exports. Imports nothing heavy until a command runs."""
