"""Run by Spark as ``python -m enrich.spark.session`` (``spark.python.daemon.module``): the
warm daemon, :func:`enrich.spark.session.daemon`."""

import sys

# The package is imported (Python imports it before running this file), and its WARM
# marker is what a worker looks up. Importing the submodule bound it over the
# ``enrich.spark`` package's lazy ``session`` function: put the function back.
module = sys.modules["enrich.spark.session"]
vars(sys.modules["enrich.spark"]).pop("session", None)
module.daemon()
