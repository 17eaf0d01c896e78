"""What every component file stands on: the protocol (``module``), the input checks
(``validate``) and the switch between the plain and the fast track (``track``)."""
