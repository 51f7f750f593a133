"""Finding memories: the one search pipeline (arguments, legs, fusion, tie-break,
score details), BM25 keyword indexing, dense scoring, filters and date cues.
Backends supply candidates; everything else about ranking lives here."""
