"""The ``graphroute`` command line."""
