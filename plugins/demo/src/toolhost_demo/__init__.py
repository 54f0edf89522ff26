"""toolhost-demo: the ``demo`` domain (demo.external_write), the approvals fixture.

Importing this package builds nothing; the host reaches the tool through
``toolhost_demo.plugin``.
"""

__all__: list[str] = []
