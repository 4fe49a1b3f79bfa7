"""The CI gate behind ``kraftcheck ci``: a manifest of checks with expected verdicts, a baseline of
accepted findings, parallel runs, and the reports CI systems read (JUnit, GitHub Actions, NDJSON).

One module per job: ``manifest`` (read and validate), ``baseline`` (accepted findings),
``runner`` (run the checks as ``kraftcheck check`` processes), ``judge`` (compare a run with its
expectation), ``expected_counts`` (rewrite expected counts), ``junit``, ``github`` and ``progress`` (outputs).
"""
