"""The pure core: strategy-tree types and settings, the routing walk, breaker state, errors, SSE,
memory policies and API translations. No I/O, no event loop; imports nothing outside `core`."""
