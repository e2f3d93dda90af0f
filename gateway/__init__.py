"""agent-gateway: an OpenAI-compatible HTTP gateway with a web-tool-using agent behind it."""

__version__ = "0.1.0"
