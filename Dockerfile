# learning-bot: the server image. Build from the repository root:
#   docker build -t learning-bot --build-arg BASE=python:3.11-slim .        (registry reachable)
#   deploy/build-images.sh                                                   (no registry: Debian
#                                                                             base via debootstrap)
# BASE is any Debian bookworm image. python:3.11-slim brings its own Python; a bare Debian base
# gets python3 (3.11) from apt. PIP_INDEX_URL, when given, replaces pip's default index;
# EXTRA_CA_CERTS (PEM text), when given, is trusted while building, for a TLS-inspecting proxy
# between the build and the index. Neither reaches the final image.
ARG BASE=learning-bot-base:bookworm

FROM ${BASE} AS build
ARG PIP_INDEX_URL=""
ARG EXTRA_CA_CERTS=""
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
    && if [ -n "$EXTRA_CA_CERTS" ]; then \
      printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/build-extra.crt \
      && update-ca-certificates >/dev/null; \
    fi \
    && python3 -m venv /opt/learning-bot
# Dependencies first, from pyproject.toml alone, so a change to the code reuses this layer.
COPY pyproject.toml /src/pyproject.toml
RUN [ -n "$PIP_INDEX_URL" ] || unset PIP_INDEX_URL; \
    [ -z "$EXTRA_CA_CERTS" ] || export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; \
    python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + p["optional-dependencies"]["postgres"]))' > /src/requirements.txt \
    && /opt/learning-bot/bin/pip install -r /src/requirements.txt
COPY README.md /src/README.md
COPY engine /src/engine
COPY storage /src/storage
COPY bot /src/bot
COPY adapters /src/adapters
COPY research /src/research
COPY learning_bot /src/learning_bot
RUN [ -n "$PIP_INDEX_URL" ] || unset PIP_INDEX_URL; \
    [ -z "$EXTRA_CA_CERTS" ] || export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; \
    /opt/learning-bot/bin/pip install --no-deps /src \
    && find /opt/learning-bot -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
# Only the interpreter and CA certificates (Slack and Discord speak TLS); no compilers, no pip.
RUN if ! command -v python3 >/dev/null 2>&1; then \
      apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates \
      && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/*; \
    fi \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home learning-bot \
    && mkdir -p /data && chown learning-bot:learning-bot /data
COPY --from=build /opt/learning-bot /opt/learning-bot
# The SQLite file and the spool live under /data unless LEARNING_BOT_DATABASE_URL and
# LEARNING_BOT_SPOOL_DIR say otherwise.
ENV PATH=/opt/learning-bot/bin:$PATH XDG_DATA_HOME=/data PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER learning-bot
WORKDIR /data
VOLUME /data
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8787/__openclaw__/api/learning/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["learning-bot"]
# Listening beyond loopback needs LEARNING_BOT_API_TOKEN (16+ characters).
CMD ["serve", "--host", "0.0.0.0", "--port", "8787"]
