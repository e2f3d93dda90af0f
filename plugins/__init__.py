"""Plugins bundled with agent-gateway."""
