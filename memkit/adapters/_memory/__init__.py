"""The in-memory store (``memory://``): everything in dicts of this process, nothing written anywhere."""
