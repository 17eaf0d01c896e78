"""What every component file stands on: the protocol (``module``), the input checks
(``validate``), the switch between the plain and the fast track (``track``), and files
written whole or not at all (``fileio``)."""
