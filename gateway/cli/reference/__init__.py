"""Reference pages written from the code: config keys, commands, metrics and endpoints (see `pages`)."""
