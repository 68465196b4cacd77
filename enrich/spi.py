"""The connector SPI: everything a dimension store's connector needs from enrich, in one door.

A connector (``connectors.redis``, ``connectors.http``, or a third one of yours) imports
from this module and from ``enrich``'s public face, and from nothing else of enrich: the
engine's, the lookup lane's and the protections' insides may move, this module's names
stay. See ``docs/writing-a-connector.md`` for the walk-through, with the Redis and HTTP
connectors as its two examples.

What a connector implements:

* :class:`LookupSource`: ``schema``, ``async lookup_many(keys)``, ``async aclose()``; the
  mapping it returns is described there (a row, several rows, a miss, a per-key error).
* optionally :class:`IncrementalSource` (``lookup_each``: answers as they arrive; build it
  on :func:`answers_as_completed`) and :class:`ColumnarSource` (``lookup_arrow`` /
  ``fetch_arrow``: Arrow keys in, a :class:`ColumnarAnswer` out; the bulk decoders
  :func:`decode_texts` / :func:`decode_documents` and :func:`answer_from_mapping` do the
  decoding); :class:`ListableSource` (``store_key`` / ``scan_dimension``) lets a full
  cache (``cache="full"``) load the whole dimension (:func:`arrow_schema` gives a
  schema's Arrow fields, for pages handed over as Arrow tables).

What it may use:

* errors: :class:`LookupFailed` (a call failed; ``retryable`` says whether to try again),
  :class:`SourceUnavailable` (the store cannot be reached), :class:`DecodeError` (a value
  does not fit the schema; final);
* validation of its settings: ``check_*`` raise ``ValueError`` naming the field and the
  bad value; :func:`short` shortens a value for a message;
* the store protections: :class:`JobRateLimit` (one budget of requests per second for a
  whole job) with :func:`limiter_for` / :func:`close_limiter` (and :func:`take_waits`,
  its waits, which a source's ``rate_limit_waits()`` hands to the joins' metrics), the
  adaptive concurrency limit (:func:`process_limit`), :class:`Slots` (a FIFO semaphore
  whose size can change), and :class:`held_back` (time waiting for a permit is not
  counted against a row's timeout);
* per-process, per-loop resources (:func:`loop_resource`, :class:`LoopLocal`): pools and
  sessions created on the loop that uses them, rebuilt after a fork;
* secrets: :func:`mask_url` / :func:`mask_text` keep passwords and tokens out of reprs,
  logs and errors.
"""

from __future__ import annotations

from ._errors import DecodeError, LookupFailed, SourceUnavailable
from .engine.checks import (
    check_choice,
    check_instance,
    check_int,
    check_non_negative,
    check_positive,
    check_seconds,
    short,
)
from .engine.clock import Clock, LoopClock
from .engine.mailbox.hold import held_back
from .engine.records.arrow_types import arrow_schema
from .engine.records.record_schema import Schema, SchemaLike
from .lookup.contract.bulk_decode import decode_documents, decode_texts
from .lookup.contract.columnar_answer import (
    ColumnarAnswer,
    ColumnarSource,
    Decode,
    answer_from_mapping,
)
from .lookup.contract.lookup_source import (
    IncrementalSource,
    ListableSource,
    LookupSource,
    answers_as_completed,
)
from .protect.adaptive import (
    AdaptiveLimit,
    LimitStatistics,
    forget_process_limit,
    peek_process_limit,
    process_limit,
)
from .protect.job_rate import JobRateLimit
from .protect.limiter import JobLimiter, close_limiter, limiter_for, take_waits
from .protect.loop_local import LoopLocal, loop_resource, pop_loop_resource
from .protect.masking import MASK, mask_text, mask_url
from .protect.slots import Slots

__all__ = (
    # what a connector implements
    "LookupSource",
    "IncrementalSource",
    "ColumnarSource",
    "ColumnarAnswer",
    "ListableSource",
    "Decode",
    "Schema",
    "SchemaLike",
    # building its answers
    "answers_as_completed",
    "answer_from_mapping",
    "decode_texts",
    "decode_documents",
    "arrow_schema",
    # errors
    "LookupFailed",
    "SourceUnavailable",
    "DecodeError",
    # validating its settings
    "check_choice",
    "check_instance",
    "check_int",
    "check_non_negative",
    "check_positive",
    "check_seconds",
    "short",
    # time
    "Clock",
    "LoopClock",
    # the store protections
    "JobRateLimit",
    "JobLimiter",
    "limiter_for",
    "take_waits",
    "close_limiter",
    "AdaptiveLimit",
    "LimitStatistics",
    "process_limit",
    "peek_process_limit",
    "forget_process_limit",
    "Slots",
    "held_back",
    # per-loop resources
    "LoopLocal",
    "loop_resource",
    "pop_loop_resource",
    # secrets
    "MASK",
    "mask_url",
    "mask_text",
)
