"""Files: atomic writes (``fileio``) and checkpoints (``checkpoint``)."""
