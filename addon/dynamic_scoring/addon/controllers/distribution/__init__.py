"""The distribution controller (``controller.py``): DynamicScorers to per-cluster ConfigMaps.

Its pure side, the planning it feeds, is ``dynamic_scoring.addon.distribution``.
"""
