"""toolhost-system: the ``system`` domain (system.current_time)."""
