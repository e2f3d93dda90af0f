"""Contracts and machinery for agent-gateway's pluggable backends."""
