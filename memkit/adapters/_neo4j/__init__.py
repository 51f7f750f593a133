"""The Neo4j store (``neo4j://``, ``bolt://``): the graph store of :mod:`memkit.adapters._graph._store` over
the Neo4j driver."""
