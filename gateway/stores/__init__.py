"""Clients of the stores several gateway processes share (Redis), built in one place from settings.

Memory and the shared circuit breakers use them; each store keeps its own keys and scripts.
"""
