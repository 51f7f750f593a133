"""The FalkorDB store (``falkordb://``): the graph store of :mod:`memkit.adapters._graph` over
FalkorDB's native client."""
