# kbroker in a container: by default one process is a whole single-node cluster.
#
#   docker build -t kbroker .
#   docker run -p 9092:9092 -v kbroker-data:/var/lib/kbroker kbroker
#
# Settings are Kafka's, as KBROKER_<NAME> variables (-e KBROKER_LOG_RETENTION_MS=60000)
# or as arguments (kbroker --override name=value). docker-compose.yml beside this
# file runs a three-node cluster. tests/test_deployment.py runs this file's
# `python -m venv` and `pip install` commands, so keep each one a RUN of its own.

FROM python:3.11-slim AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kbroker
COPY . /src
RUN /opt/kbroker/bin/pip install --no-cache-dir /src


FROM python:3.11-slim

# Numeric ids, so that Kubernetes' runAsNonRoot can verify them.
RUN groupadd --system --gid 10001 kbroker \
    && useradd --system --uid 10001 --gid kbroker --home-dir /var/lib/kbroker --no-create-home kbroker \
    && mkdir -p /var/lib/kbroker \
    && chown kbroker:kbroker /var/lib/kbroker
COPY --from=build /opt/kbroker /opt/kbroker

# The default listener takes every interface and tells clients localhost:9092,
# right for `docker run -p 9092:9092` (and the schema registry every interface's
# 8081, for `-p 8081:8081`); set KBROKER_LISTENERS and
# KBROKER_ADVERTISED_LISTENERS together for anything else.
ENV PATH=/opt/kbroker/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KBROKER_LOG_DIRS=/var/lib/kbroker \
    KBROKER_LISTENERS=PLAINTEXT://:9092 \
    KBROKER_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KBROKER_SCHEMA_REGISTRY_LISTENERS=http://:8081 \
    KBROKER_METRICS_PORT=9308

# A new named volume takes this directory's owner, so the broker can write to it.
VOLUME /var/lib/kbroker
WORKDIR /var/lib/kbroker
USER 10001:10001

# 9092: clients; 9093: the controller quorum (in a cluster); 8081: the schema registry;
# 9308: the web console, /metrics, /health, /ready.
EXPOSE 9092 9093 8081 9308

HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('KBROKER_METRICS_PORT', '9308'), timeout=4)"]

# Exec form: the broker is PID 1 and gets SIGTERM itself, to stop cleanly.
STOPSIGNAL SIGTERM
ENTRYPOINT ["kbroker"]
CMD []
