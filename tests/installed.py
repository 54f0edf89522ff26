"""Make real installed distributions for tests: a dist-info directory on a path entry.

importlib.metadata discovers a ``*.dist-info`` with an ``entry_points.txt`` on ``sys.path``
exactly as it discovers one pip wrote, so discovery is tested against the real machinery.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def install_fake_plugin(site: Path, dist: str, module: str, source: str) -> None:
    """Write ``module.py`` and ``<dist>-0.1.dist-info`` declaring it a toolhost plugin."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[toolhost.plugins]\n{module} = {module}\n")


GOOD_PLUGIN = '''
from toolhost import hookimpl, Domain

@hookimpl
def toolhost_domains():
    return [Domain("fake")]
'''
