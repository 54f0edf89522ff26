"""The ``toolhost`` command: the operator's surface (``main``), the 17 * 23 demo, the catalog
exports. Imports nothing heavy until a command runs."""
