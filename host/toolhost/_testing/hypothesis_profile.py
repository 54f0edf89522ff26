"""The hypothesis profile the test kit loads: hypothesis's defaults without the timing deadline.

A deadline measures the machine, not the code: an example that takes 250 ms on a loaded CI
machine fails a test that passes everywhere else (issue 28: a plugin team's ``nox`` went red
on one). Every other setting stays hypothesis's own. The profile is loaded only when nothing
else chose one: ``--hypothesis-profile``, a conftest's ``settings.load_profile`` and
hypothesis's own ``ci`` profile (which has no deadline either) all win.
"""

from __future__ import annotations

import pytest

__all__ = ["PROFILE", "pytest_configure"]

#: The profile's name, for ``--hypothesis-profile toolhost`` or ``settings.load_profile``.
PROFILE = "toolhost"


def pytest_configure(config: pytest.Config) -> None:
    """Register the profile, and load it when the current one is hypothesis's ``default``."""
    try:
        from hypothesis import settings
    except ImportError:  # hypothesis is a test dependency, not toolhost's
        return
    settings.register_profile(PROFILE, deadline=None)
    chosen = config.getoption("hypothesis_profile", default=None)
    if chosen is None and settings.get_current_profile_name() == "default":
        settings.load_profile(PROFILE)
