# syntax=docker/dockerfile:1
# The gateway as a container: non-root, offline tokenizers, config at /etc/gateway/gateway.yaml.
#   docker build -t gateway .
#   docker run -p 8080:8080 -v ./my.yaml:/etc/gateway/gateway.yaml:ro gateway
# Without a mounted config it serves the built-in mock model (gateway/default.yaml).

# ---- build: the project and its dependencies into a virtualenv the runtime stage copies whole,
# so pip's build tooling and the source tree never reach the final image.
FROM python:3.11.14-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway

RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir /src

# ---- runtime
FROM python:3.11.14-slim-bookworm

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GATEWAY_CONFIG=/etc/gateway/gateway.yaml

# A fixed numeric uid/gid, so volume ownership and Kubernetes runAsUser can rely on it.
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --no-log-init --uid 10001 --gid 10001 \
       --home-dir /var/lib/gateway --shell /usr/sbin/nologin gateway \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/gateway

COPY --from=build /opt/venv /opt/venv
COPY gateway/default.yaml /etc/gateway/gateway.yaml

# The tokenizer files must already be in the image: load both encodings with no network at all.
# get_encoding() degrades to an estimate instead of failing, so tiktoken is asked directly.
RUN --network=none python -c "import tiktoken; from gateway.tokens import use_offline_encodings; use_offline_encodings(); [tiktoken.get_encoding(name) for name in ('cl100k_base', 'o200k_base')]"

# Relative paths in the config (the default SQLite file ./data/memory.db) land on the volume.
WORKDIR /var/lib/gateway
VOLUME /var/lib/gateway

USER 10001:10001
EXPOSE 8080

# Needs no curl: the image's own python. The port is server.port of the config (8080 by default).
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=3).status != 200)"]

CMD ["gateway", "serve", "--config", "/etc/gateway/gateway.yaml", "--log-format", "json"]
