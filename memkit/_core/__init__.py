"""The ground floor: models, errors, limits and validation, records, the port with its
declared capabilities, the operations and the one store base every adapter extends,
and the adapter registry. Nothing here imports a backend, a view or a server."""
