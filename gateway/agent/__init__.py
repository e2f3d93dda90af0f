"""The agent: one loop for both APIs, wire-agnostic, yielding typed events."""
