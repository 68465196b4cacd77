"""Delta Lake as a sink: Spark's own ``delta`` format, exactly once by batch id.

- :mod:`.jars`: Delta's jars, the session settings they need, the Spark line they run on.
- :mod:`.keying`: how Delta keys its commits (by batch id, not by the source record), and
  so what it refuses.
"""
