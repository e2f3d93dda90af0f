"""`python -m gateway` with pyreqwest as the upstream transport (bench/reqwest_transport.py), for
issue 33's A/B: the same command line, e.g. `python -m bench.reqwest_gateway serve --port 8000`.

Bench-only: the product calls the upstream with aiohttp's client (bench/README.md says why).
bench.callgrind and bench.run take `--gateway-module bench.reqwest_gateway` to measure it.
Needs `pip install pyreqwest`.
"""

from __future__ import annotations

from gateway.cli.main import main
from gateway.upstream import transport_choice
from gateway.upstream.transport import Transport, TransportSettings


def _reqwest(settings: TransportSettings) -> Transport:
    from bench.reqwest_transport import ReqwestTransport

    return ReqwestTransport(settings)


# the one place a transport is chosen (gateway/upstream/transport_choice.py), pointed at pyreqwest's
transport_choice.open_transport = _reqwest

if __name__ == "__main__":
    raise SystemExit(main())
