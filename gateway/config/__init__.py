"""Config loading: YAML, `${VAR}` interpolation, the strict read into `core` objects."""
