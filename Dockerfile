# The code location image: the product and its locked dependencies (no dev group), run as a
# non-root user. The Dagster Helm chart starts it as the user code deployment (a gRPC server on
# port 3030) and the K8sRunLauncher starts each run in a pod of this same image.
#   docker build -t registry.example.com/whitebit-etl:<tag> .
FROM python:3.11-slim

# uv, pinned to the version the lock file is kept with; copied from its official image.
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv

ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/whitebit-etl/.venv \
    PATH=/opt/whitebit-etl/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1

WORKDIR /opt/whitebit-etl

# The dependencies first, from the lock alone: this layer is rebuilt only when the lock changes.
COPY pyproject.toml uv.lock ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-install-project

# Then the product itself (README.md: the package's metadata names it).
COPY README.md workspace.yaml ./
COPY assets ./assets
COPY pipeline ./pipeline
COPY warehouse ./warehouse
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev

# A user of its own. DAGSTER_HOME (where the chart mounts the instance's dagster.yaml) and the
# state directory (DuckDB catalog, pacing files) are its to write.
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin whitebit \
    && mkdir -p /opt/dagster/dagster_home /var/lib/whitebit-etl \
    && chown whitebit:whitebit /opt/dagster/dagster_home /var/lib/whitebit-etl
USER 10001:10001
ENV DAGSTER_HOME=/opt/dagster/dagster_home

EXPOSE 3030
# The code location workspace.yaml loads; the chart gives the same arguments to `dagster api grpc`.
CMD ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", "3030", "-m", "assets.definitions"]
