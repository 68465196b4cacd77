"""``kafka-alo``: a Python Kafka sink, at least once, with Spark's Kafka sink's options
and row conventions, that can run a query's lookup joins inside its write (the profile
``low_latency(df, sink="kafka")``).

- :mod:`.alo_sink`: the data source and its writers.
- :mod:`.record_columns`: rows to records (``key``, ``value``, ``topic``,
  ``partition``, ``headers``; ``valueColumns`` as JSON), checked on the driver.
- :mod:`.producing`: produce, flush, every delivery report checked; producers kept per
  worker process.
- :mod:`.alo_settings`, :mod:`.alo_errors`.

Needs confluent-kafka (``pip install 'spark-enrich[kafka]'``) on the executors. See
docs/kafka.md.
"""

from __future__ import annotations

from .alo_errors import DeliveryFailed as DeliveryFailed, KafkaAloRefused as KafkaAloRefused

__all__ = ("DeliveryFailed", "KafkaAloRefused")
