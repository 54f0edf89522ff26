"""toolhost-DOMAIN: the DOMAIN tools for toolhost (the hooks are in ``plugin``)."""  # noqa: N999
