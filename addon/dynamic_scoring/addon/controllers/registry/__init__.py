"""The scorer registry's controller (``controller.py``): probes DynamicScorers and writes their status.

Its pure side, the models and the probe logic it feeds, is ``dynamic_scoring.addon.registry``.
"""
