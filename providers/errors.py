"""The root of every exception agent-gateway defines, and the plugin loader's own error.

The root lives here, not in `gateway/`, because `providers/` (what a plugin author reads) may import
nothing from the server. `gateway/errors.py` draws the whole tree. `except AgentGatewayError` catches
everything the distribution raises on purpose and nothing else.
"""

from __future__ import annotations


class AgentGatewayError(Exception):
    """Base of every exception class in gateway/, providers/ and plugins/."""


class PluginLoadError(AgentGatewayError):
    """A plugin could not be loaded; the message is the reason shown to the user."""
