"""Checking Transformer code: finite-difference gradient checks (``gradcheck``) and the
gradient-check case of every public component (``cases``)."""
