"""Calling a scoring API: the request the agent sends and the answer it accepts.

Not to be confused with ``dynamic_scoring.scorer``, the library a scoring API is written with: this
is the agent's side of the same exchange.
"""
