"""The aiohttp server: app factory, middlewares and thin handlers."""
