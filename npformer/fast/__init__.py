"""The fast track: drop-in twins of the plain functions marked ``@fast_twin``.

Each module here mirrors a component file of the plain track and holds functions of
the same names and signatures, registered with ``@twin_of(plain)``. They compute the
same numbers with speed idioms the plain files leave out. ``npformer.track`` chooses
which one runs; ``tests/test_tracks.py`` holds every pair equal.
"""
