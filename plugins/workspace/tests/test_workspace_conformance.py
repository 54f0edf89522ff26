from toolhost_conformance import ConformanceSuite


class TestConformance(ConformanceSuite):
    distributions = ("toolhost-workspace",)
