# agent-gateway: the gateway as a container. Settings come from the environment or from
# /data/.env and /data/config.yaml (the home, on a volume); profiles live in /data/profiles/NAME.
#
# Two stages: the first builds the project's wheel with a pinned build backend; the second installs
# the pinned dependencies and that wheel, so /app holds no source tree, build/ or egg-info.
# With podman, build with `podman build --format docker`: its default (OCI) format drops HEALTHCHECK.
FROM python:3.12-slim AS wheel

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The build backend, pinned with hashes (requirements-build.lock), and no build isolation: pip must
# not fetch whatever setuptools is newest on the day of the build.
COPY requirements-build.lock ./
RUN pip install --require-hashes -r requirements-build.lock
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY providers ./providers
COPY plugins ./plugins
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The same dependencies as `pip install .` (pyproject.toml), pinned with hashes in requirements.lock
# so that every build gets the versions CI tested; README (Docker) says how to regenerate it.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock && rm requirements.lock
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-deps /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin gateway \
    && mkdir -p /data \
    && chown gateway:gateway /data \
    && chmod 700 /data

# A container is reached from outside its own loopback, so it binds every interface; serve then
# refuses to start without API_SERVER_KEY, which is the point.
ENV AGENT_GATEWAY_HOME=/data \
    API_SERVER_HOST=0.0.0.0
VOLUME /data
USER gateway
EXPOSE 8642

# Readiness, not liveness: a store that cannot be used (a read-only /data, PostgreSQL
# gone) makes /health/ready answer 503 and the container unhealthy. No curl in the slim image: ask
# with the Python that is already there.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('API_SERVER_PORT', '8642') + '/health/ready', timeout=4)"]

# SIGTERM drains requests in flight for API_SERVER_SHUTDOWN_GRACE seconds (default 10): stop the
# container with a longer timeout than that (`docker stop -t 20`, compose's stop_grace_period).
ENTRYPOINT ["agent-gateway"]
CMD ["serve"]
