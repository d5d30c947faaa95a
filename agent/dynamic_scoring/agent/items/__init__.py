"""From a scorer's results to AddOnPlacementScore items.

Normalising, clamping and rounding (``maths``), item names (``dimensions``) and the
AddOnPlacementScore names themselves (``naming``).
"""
