"""kraftcheck's engine: spec interface, state encoding, compiled kernels, explorers and CLI."""

__version__ = "0.1.0"
