"""Authored scenarios shipped with kraftcheck (YAML), replayed by ``kraftcheck trace replay``."""
