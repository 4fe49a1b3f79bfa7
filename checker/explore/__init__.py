"""Explorers: the compiled breadth-first engine and the pure-Python reference, behind one interface."""
