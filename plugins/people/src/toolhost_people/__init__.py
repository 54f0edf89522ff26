"""toolhost-people: the ``people`` domain (people.search, people.context 1.0.0; people.history
1.0.0 and 1.1.0), registered only with AGENT_PEOPLE_ENABLED=1.

People are the owner's correspondents, derived from toolhost-email's mail cache through its
public read API, plus the addresses the operator links (``toolhost-people link``). Importing
this package builds nothing; the host reaches the tools through ``toolhost_people.plugin``.
"""

__all__: list[str] = []
