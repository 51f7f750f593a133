"""What the two graph databases share: the store over a Cypher session (``_store``), its search
(``_search``), its graph views (``_views``) and every Cypher statement (``_cypher``). FalkorDB
and Neo4j each add only their connection (:mod:`memkit.adapters._falkordb._adapter`,
:mod:`memkit.adapters._neo4j._adapter`)."""
