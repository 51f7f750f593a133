"""The Mem0 store (``mem0://``, ``mem0+cloud://``): ``_adapter`` (the :class:`Mem0Adapter`), ``_backend``
(mem0's own Memory or its cloud client behind one face) and ``_seed`` (the seed's Mem0 config)."""
