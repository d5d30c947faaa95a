"""Runnable samples: two scoring APIs (``scorers``); the manifests that use them are in ``samples/``."""
