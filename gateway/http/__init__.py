"""The aiohttp server: app factory, the one front door (middleware), routes, streaming."""
