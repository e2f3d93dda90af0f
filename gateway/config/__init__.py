"""Settings and where they come from: the options table, profile files, the environment."""
