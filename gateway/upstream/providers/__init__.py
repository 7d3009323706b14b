"""Upstream providers: how one attempt reaches one target."""
