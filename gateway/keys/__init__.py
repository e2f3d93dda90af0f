"""API keys in memory: the key set a replica accepts (refreshed from the store), each key's limits
and per-replica counters, and the observer that counts a key's usage. Above the store and the agent;
below observability, background runs and the front door."""
