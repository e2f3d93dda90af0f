"""The store's PostgreSQL backend (asyncpg): one database shared by every replica."""
