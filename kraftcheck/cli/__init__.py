"""The ``kraftcheck`` command line: one module per command, one terminal object for output."""
