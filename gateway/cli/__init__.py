"""The command line and app wiring: serve, workers, reload, check-config."""
