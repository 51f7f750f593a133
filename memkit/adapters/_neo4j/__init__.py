"""The Neo4j store (``neo4j://``, ``bolt://``): the graph store of :mod:`memkit.adapters._graph` over
the Neo4j driver."""
