"""The serve layer: what memkit offers outside Python code, over one catalogue of agent tools.

* ``_catalogue``: every tool an agent can call, declared once (name, description, JSON schema,
  whether it writes, what it runs); function calling and the MCP server both take theirs from it.
* ``_kv``: the key-value scratchpad the key-value tools run on (:class:`memkit.tools.MemoryTools`).
* ``_dispatch``: function calling: ``ProviderTools``, ``ToolDispatcher``, pydantic-ai registration.
* ``_mcp``: the MCP server: which namespaces a client reaches, the tools and resources, serving.
* ``_stdio``: every line an MCP client sends over stdio is screened and answered.
* ``_runs``: runs, their steps, recalls and marks read straight from a store (no pandas): through its
  one-shot reads where it offers them (:mod:`memkit._core._reads`), else through its port.
* ``_cli``, ``_audit``, ``_terminal``: the ``memkit`` command, its audit commands, safe printing.

``memkit.cli`` and ``memkit.tools`` are the public faces; nothing below this layer imports it.
"""
