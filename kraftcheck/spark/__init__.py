"""Exploration on Apache Spark (classic PySpark, RDD API): ``SparkExplorer`` gives the local
engine's exact answers with the per-state work on the executors. Importing this package does not
import pyspark; starting an exploration does. See docs/spark.md."""

from kraftcheck.spark.explorer import SparkExplorer

__all__ = ["SparkExplorer"]
