"""The async wait operator: Flink's AsyncWaitOperator on asyncio (no pyspark here).

Internal: import the public names from :mod:`enrich`.
"""
