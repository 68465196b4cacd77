"""Which of a chunk's distinct keys the lane's cache sees: admission measured, not assumed.

A probe and a fill cost the cache about as much per key as loopback Redis costs to ask
and decode it (profiled on this 2-core machine, a cold 100,000-key run: a ``dict`` probe
of a key not in the CPU's caches, its recency note and its fill, against an ``MGET``
reply decoded in bulk), so a cold cache that probes and fills every key of every chunk
pays twice for each key it will not answer again, and was slower than no cache. So, for
a large chunk of integer keys:

* while the cache is measured cold, one chunk in :data:`STRIDE` probes and fills a
  fixed sample of the key space (one key in :data:`SAMPLE`, by a hash of its value,
  the same keys every time); the other chunks leave the cache alone and ask the
  source, as without a cache;
* once the sample's hit ratio reaches :data:`FULL_AT` (over :data:`WINDOW` sampled
  keys), every key of every chunk is probed and filled, until the ratio falls below
  :data:`SAMPLE_BELOW`.

The sampled keys are cached exactly as every key would be, so their hit ratio is what
the whole cache's would be: a cache whose keys come back (a warm one, a stream over a
bounded key space) turns full after a window; one whose keys rarely repeat within its
size costs a few percent. A key left out is asked of the source as without a cache and
counts as a cache miss. Chunks of fewer than :data:`MIN_KEYS` distinct keys, keys of
other types and a lane not told the chunk's rows (pushed batches) probe every key.
Outcomes never change: a key is answered by the cache or by the source, as the store
would answer it without admission.

Used on the runtime loop thread only, one per store.
Imports no pyspark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# One key in SAMPLE (a power of two) is probed while the cache is measured cold.
SAMPLE = 16
# Chunks with fewer distinct keys than this probe every key (the probe is cheap then).
MIN_KEYS = 1_024
# While sampling, one large chunk in STRIDE probes and fills its sampled keys; the others
# leave the cache alone.
STRIDE = 4
# Sampled keys probed per decision.
WINDOW = 512
# The sampled keys' hit ratio at which every key is probed, and below which sampling
# resumes.
FULL_AT = 0.8
SAMPLE_BELOW = 0.6

# A 64-bit multiplier (Fibonacci hashing): the top bits of key * GOLDEN spread any keys.
_GOLDEN = pa.scalar(-7046029254386353131, pa.int64())
# The top bits of the hash: a key is sampled when they are all zero.
_TOP = pa.scalar(-(1 << (64 - (SAMPLE.bit_length() - 1))), pa.int64())


def sampled(keys: pa.Array) -> pa.Array:
    """Which of ``keys`` (integers) are in the fixed sample: a bool array."""
    if keys.type != pa.int64():
        keys = keys.cast(pa.int64())
    mixed = pc.multiply(keys, _GOLDEN)  # wraps: a hash, not a product
    return pc.equal(pc.bit_wise_and(mixed, _TOP), 0)


class Admission:
    """The lane's admission to one store (see the module docstring).

    Attributes:
        full: whether every key is probed now (else the sample, one chunk in STRIDE).
    """

    __slots__ = ("_chunks", "_hits", "_probes", "full")

    def __init__(self) -> None:
        self.full = False
        self._chunks = 0  # large chunks seen while sampling
        self._hits = 0
        self._probes = 0

    def admit(
        self, distinct: pa.Array, indices: pa.Array | None
    ) -> tuple[pa.Array | None, pa.Array | None] | None:
        """For ``distinct`` keys of a chunk whose rows are ``indices``: None when the
        cache sees none of them, else which keys it sees (None: all of them) and which
        are watched (the sampled keys; None: none), bool arrays aligned with
        ``distinct``."""
        if indices is None or len(distinct) < MIN_KEYS or not pa.types.is_integer(distinct.type):
            return None, None
        if not self.full:
            self._chunks += 1
            if self._chunks % STRIDE:
                return None
        watched = sampled(distinct)
        return (None if self.full else watched), watched

    def record(self, hits: int, probes: int) -> None:
        """The watched keys of a chunk: ``hits`` of ``probes`` were cached."""
        self._hits += hits
        self._probes += probes
        if self._probes < WINDOW:
            return
        ratio = self._hits / self._probes
        self._hits = self._probes = 0
        self.full = ratio >= (SAMPLE_BELOW if self.full else FULL_AT)
