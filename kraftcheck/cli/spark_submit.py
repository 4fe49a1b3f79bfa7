"""What ``spark-submit`` runs: ``kraftcheck check --engine spark`` with the remaining arguments,
on the master and settings spark-submit was given (docs/spark.md has the exact line)::

    spark-submit --master spark://HOST:7077 "$(python -m kraftcheck.cli.spark_submit --path)" \\
        --spec two_phase --param rm=7 --work-dir /shared/kraftcheck-run
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    if argv == ["--path"]:  # where this file is, for the spark-submit line
        print(__file__)
        return
    from kraftcheck.cli.main import cli
    cli(["check", "--engine", "spark", *argv], prog_name="kraftcheck")


if __name__ == "__main__":
    main(sys.argv[1:])
