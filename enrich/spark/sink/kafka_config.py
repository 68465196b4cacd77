"""The Kafka sinks' client settings, read from Spark's options the way Spark's own Kafka
sink reads them: every ``kafka.*`` option goes to the producer without its prefix.

Shared by the ``kafka-eos`` (exactly once) and ``kafka-alo`` (at least once) sinks.
confluent-kafka (librdkafka) names most settings as Java's client does; Java's JAAS line
(``kafka.sasl.jaas.config``: ``... username="u" password="p";``) becomes librdkafka's
``sasl.username``/``sasl.password``. A secret's value is never shown: :func:`masked` for
a config, :func:`scrubbed` for a client's error message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PREFIX = "kafka."
JAAS = "sasl.jaas.config"
# librdkafka's default partitioner hashes keys with CRC32; Java's (Spark's Kafka sink)
# with murmur2: the same key then lands in the same partition as Spark would put it.
PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": "5"}
_SECRET = re.compile(r"password|secret|jaas|token|key\.pem|keystore", re.IGNORECASE)
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def is_secret(name: str) -> bool:
    """Whether a client setting holds a secret (never logged, never in a repr)."""
    return bool(_SECRET.search(name))


def masked(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` with secret values replaced by ``***``."""
    return {k: ("***" if is_secret(k) else v) for k, v in config.items()}


def scrubbed(text: str, config: Mapping[str, str]) -> str:
    """``text`` (a client's error message) with every secret value of ``config``
    replaced by ``***``."""
    for name, value in config.items():
        if is_secret(name) and value:
            text = text.replace(str(value), "***")
    return text


def client_config(
    options: Mapping[str, str], *, error: type[ValueError] = ValueError
) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix, Java's JAAS line turned into
    librdkafka's ``sasl.username``/``sasl.password``.

    Raises:
        error: the JAAS line holds no username or password (its value is not shown).
    """
    config = {k[len(PREFIX) :]: str(v) for k, v in options.items() if k.startswith(PREFIX)}
    jaas = config.pop(JAAS, None)
    if jaas is not None:
        found = dict(_JAAS_FIELD.findall(jaas))
        if "username" not in found or "password" not in found:
            raise error(
                f'option {PREFIX}{JAAS} must hold username="..." and password="..." '
                "(PlainLoginModule or ScramLoginModule); its value is not shown"
            )
        config.setdefault("sasl.username", found["username"])
        config.setdefault("sasl.password", found["password"])
    return config


class Caseless(dict[str, str]):
    """Spark's options, looked up by name whatever its case (pyspark hands them over
    lowercased)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(str(key).lower())


def caseless(options: Mapping[str, Any]) -> Caseless:
    """``options`` as text, looked up whatever the case of a name."""
    return Caseless({str(k).lower(): str(v) for k, v in options.items()})
