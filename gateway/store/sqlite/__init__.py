"""The store's SQLite backend (aiosqlite): one file in the profile home, for one process."""
