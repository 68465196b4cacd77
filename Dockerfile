# spark-enrich with Spark: Python 3.11 and a Java 17 runtime.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY enrich ./enrich
COPY connectors ./connectors
COPY jobs ./jobs
RUN pip install --no-cache-dir ".[all]"
ENV PYSPARK_PYTHON=python3
CMD ["enrich", "demo"]
