"""``kraftcheck sweep``: a matrix of configurations run as independent checks, one table out.

``matrix`` builds the configurations (from the command line or a TOML file), ``local`` runs them
as ``kraftcheck check`` processes on this machine, ``spark`` as one Spark task each, and
``table`` turns their reports into Markdown, CSV or JSON.
"""
