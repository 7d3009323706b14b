"""Upstream work: dispatch over the strategy tree, deadlines, providers, breakers, network guards."""
