"""The FalkorDB store (``falkordb://``): the graph store of :mod:`memkit.adapters._graph._store` over
FalkorDB's native client."""
