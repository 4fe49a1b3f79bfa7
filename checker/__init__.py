"""kraftcheck's engine: spec interface, state encoding, compiled kernels and explorers.

The lowest layer: it imports no spec, invariant, trace or command-line code."""

__version__ = "0.2.0"
