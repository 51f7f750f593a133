"""Ranking: BM25 keyword scoring, the fusion of keyword and semantic legs, dates in queries, and the
hybrid knobs. Pure functions over the ground floor's types; the search pipeline that runs them for a
store is :mod:`memkit.store._search`."""
