"""The gateway (`python -m gateway ...`) with its key ring's refresh moved out of a measured window:
for `bench.callgrind --gateway-module bench.steady_gateway` pairs of a key's per-request cost.

The ring's refresh (keys read, usage written, every 2 s: keys/ring.py) is spread over the requests
made meanwhile, so under valgrind its share per request grows as the host gets busier (fewer
requests per refresh): on a host at load ~19, one tree measured 18k instructions per request
*more* after a change that makes 34 fewer Python calls per request. With the refresh an hour
apart, the keys are read once at start and a pair compares the requests' own work. Copy this file
into a `--src` tree that lacks it.
"""

from __future__ import annotations

import runpy
import sys

import gateway.keys.ring

gateway.keys.ring.REFRESH_SECONDS = 3600.0  # read by the ring's loop at each sleep
sys.argv = ["gateway", *sys.argv[1:]]
runpy.run_module("gateway", run_name="__main__")
