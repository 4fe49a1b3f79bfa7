"""Counterexample traces: networkx graphs, files, pictures and replay."""
