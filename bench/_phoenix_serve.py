"""Start Arize Phoenix (``phoenix serve``) with its gRPC collector on 127.0.0.1 instead of every
interface: Phoenix binds gRPC to ``[::]`` with no setting to change it, and a benchmark's servers
listen on the loopback only. Run with the Python of the venv Phoenix is installed in."""

from __future__ import annotations

import sys

import grpc.aio


def _loopback(address: str) -> str:
    return "127.0.0.1:" + address.rsplit(":", 1)[1] if address.startswith("[::]:") else address


_insecure = grpc.aio._server.Server.add_insecure_port
grpc.aio._server.Server.add_insecure_port = lambda self, address: _insecure(self, _loopback(address))

from phoenix.server.main import main  # noqa: E402

sys.argv = ["phoenix", "serve"]
main()
