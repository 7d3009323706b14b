"""Governance: which routes a gateway key may use, its rate limits and budget, and keys issued at run time.

A service beside memory and upstream: the server asks it to admit a request once its route is
known (before memory or an upstream is touched) and tells it when the request ended.
"""
