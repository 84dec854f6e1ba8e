# syntax=docker/dockerfile:1
# synthgate image: `docker build -t synthgate .` (BuildKit, for the cache mounts below).
#
# Base images are pinned by tag; pin them by digest too (`image:tag@sha256:...`) once a release
# process records digests.

# ---- build ---------------------------------------------------------------------------------------
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# The slim image has gcc, which the bundled SQLite and ring need; jemalloc (the allocator) also
# builds with make, which it lacks. TLS is rustls, so no OpenSSL.
# The whole workspace is copied (cargo needs every member's manifest, crates/testkit included),
# but only the product package is built: the test doubles never enter the image.
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
COPY . .
# The registry and target caches survive between builds on the same builder, so a source-only
# change recompiles only synthgate itself. The binary is copied out of the cached target dir
# because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p synthgate --bin synthgate \
    && install -D -m 0755 target/release/synthgate /out/synthgate

# ---- ruff ----------------------------------------------------------------------------------------
# Python code validators run ruff, installed the way a user gets it: the `ruff` wheel from PyPI,
# which holds one binary (it needs only glibc and libgcc, both in the bookworm runtime). Pinned
# to the version DataDesigner 0.9.6 was checked with; only the binary goes into the runtime
# image (no Python there).
FROM python:3.11-slim-bookworm AS ruff
RUN pip install --no-cache-dir --disable-pip-version-check ruff==0.17.6 \
    && install -D -m 0755 "$(command -v ruff)" /out/ruff \
    && /out/ruff --version

# ---- runtime-base: the runtime image but for the synthgate binary --------------------------------
FROM debian:bookworm-slim AS runtime-base
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 synthgate \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin synthgate \
    && mkdir -p /app/config /app/data \
    && chown synthgate:synthgate /app/data
WORKDIR /app
# On PATH, where `validators.ruff_path` (default `ruff`) finds it.
COPY --from=ruff /out/ruff /usr/local/bin/ruff
COPY config/synthgate.yaml /app/config/synthgate.yaml

# Listen on every interface inside the container; the embedded SQLite database (used when no
# database URL is configured) lives in the /app/data volume.
ENV SYNTHGATE_CONFIG=/app/config/synthgate.yaml \
    SYNTHGATE__SERVER__HOST=0.0.0.0 \
    SYNTHGATE__SERVER__PORT=8080
VOLUME ["/app/data"]
USER synthgate:synthgate
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["synthgate", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
# SIGTERM (the default stop signal) starts a graceful drain; give it time with
# `docker stop --time` / compose's stop_grace_period.
ENTRYPOINT ["synthgate"]
CMD ["serve"]

# ---- runtime-prebuilt (`--target runtime-prebuilt`) ----------------------------------------------
# The same image around a release binary built outside the builder, on a Debian 12 (bookworm,
# glibc 2.36) host, so the compile is not done twice where a binary already exists:
#   cargo build --release --locked -p synthgate --bin synthgate
#   install -D target/release/synthgate .prebuilt/synthgate
#   docker build --target runtime-prebuilt -t synthgate:local .
# scripts/compose-check builds the image this way in CI. The build stage is skipped.
FROM runtime-base AS runtime-prebuilt
COPY .prebuilt/synthgate /usr/local/bin/synthgate

# ---- runtime (the default target) ----------------------------------------------------------------
FROM runtime-base AS runtime
COPY --from=build /out/synthgate /usr/local/bin/synthgate
