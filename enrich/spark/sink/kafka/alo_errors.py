"""What the ``kafka-alo`` sink refuses, and what fails a task's write.

::

    EnrichError
    ├── KafkaAloRefused (also ValueError)      an option or the rows' columns are wrong
    └── DeliveryFailed (also RuntimeError)     records the broker did not take

A refusal is raised on the driver before any task writes (an option, a column missing or
of the wrong type), or in a task for a row no check could see before (a null topic).
No message holds a secret of the ``kafka.*`` options.
"""

from __future__ import annotations

from enrich import EnrichError


class KafkaAloRefused(EnrichError, ValueError):
    """The ``kafka-alo`` sink cannot write these rows with these options; the message
    names the option or the column, and what to change."""

    retryable = False


class DeliveryFailed(EnrichError, RuntimeError):
    """A task's records were not all delivered (the broker refused them, or
    ``delivery.timeout.ms`` passed): the task fails, and Spark's retry writes its rows
    again (records delivered before stay: at least once).

    Attributes:
        topic: the target topic of the first record that failed.
        partition: its partition (-1 when none was assigned, as for an unknown topic).
        failed: how many of the task's records failed.
    """

    def __init__(self, message: str, topic: str, partition: int, failed: int) -> None:
        super().__init__(message)
        self.topic, self.partition, self.failed = topic, partition, failed

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.topic, self.partition, self.failed))
