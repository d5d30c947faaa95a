"""Runnable samples: two scoring APIs (``samples.scorers``) beside the manifests that use them."""
