# llmgw's container image: the gateway, the node agent and the sim-engine,
# run by the pinned Bun. Build from the repository root:
#   podman build --format docker -t localhost/llmgw:0.1.0 .
#   (or docker build: Docker 23+, whose BuildKit reads RUN --mount)
# or `npm run image:build` (deploy/image/build.sh), which makes the base from
# Debian packages when no registry is reachable. docs/deploy.md#container-image.
#
# BASE_IMAGE is any Debian bookworm root file system with apt: the registry's
# debian:bookworm-slim by default, or one made locally with debootstrap.
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim

# Stage 1: the dependencies, installed from package-lock.json by npm. Bun is
# a devDependency (the npm package `bun`): its binary is set aside before the
# dev tools are pruned, so the runtime gets Bun and production packages only.
FROM ${BASE_IMAGE} AS deps
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY package.json package-lock.json ./
# Behind a TLS-intercepting proxy, give the build its CA bundle as the secret
# build_ca (build.sh --ca-file): npm trusts it here, and it is not kept in
# any layer. Debian's npm runs on Node 18 and warns that packages ask for
# Node 20: only npm runs here; Bun runs everything at run time.
RUN --mount=type=secret,id=build_ca \
    if [ -s /run/secrets/build_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/build_ca; fi \
 && npm ci --no-audit --no-fund \
 && install -D -m 0755 node_modules/bun/bin/bun.exe /out/bun \
 && npm prune --omit=dev --no-audit --no-fund \
 && /out/bun --version
# Scopes whose packages were all dev tools are left empty by the prune.
RUN find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete

# Stage 2: the runtime. No Node.js, npm or compiler: Bun (glibc only), the
# sources Bun runs as they are, and the production node_modules.
FROM ${BASE_IMAGE}
ARG LLMGW_VERSION=0.1.0
LABEL org.opencontainers.image.title="llmgw" \
      org.opencontainers.image.description="OpenAI-compatible gateway and fleet manager for LLM inference" \
      org.opencontainers.image.version="${LLMGW_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# The uid and gid deploy/k8s/gateway-deployment.yaml runs as.
RUN groupadd --gid 10001 llmgw \
 && useradd --uid 10001 --gid llmgw --home-dir /var/lib/llmgw --no-create-home --shell /usr/sbin/nologin llmgw \
 && install -d -o llmgw -g llmgw -m 0750 /var/lib/llmgw /var/cache/llmgw
# bin/bun-env finds Bun on PATH when node_modules/bun is absent (pruned above).
COPY --from=deps /out/bun /usr/local/bin/bun
WORKDIR /opt/llmgw
COPY --from=deps /build/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY config ./config
COPY workers ./workers
COPY bench ./bench
COPY src ./src
# The default configuration: listeners on all interfaces but the admin one,
# the metrics listener on (the healthcheck below and Kubernetes' probes use
# it), data_dir on the volume. Mount your own over /etc/llmgw.
COPY deploy/image/llmgw.yaml /etc/llmgw/llmgw.yaml

# As the systemd unit: data_dir is the one writable place; Bun caches
# transpiled sources under XDG_CACHE_HOME. `serve` reads LLMGW_CONFIG when no
# --config is given: `podman run IMAGE serve --upstream URL` uses the file above.
ENV LLMGW_CONFIG=/etc/llmgw/llmgw.yaml \
    LLMGW_DATA_DIR=/var/lib/llmgw \
    XDG_CACHE_HOME=/var/cache/llmgw
VOLUME ["/var/lib/llmgw"]
USER 10001:10001
EXPOSE 8080 9190

# Liveness of the process that serves: GET /healthz on the metrics listener,
# the route and port Kubernetes probes. Set LLMGW_HEALTHCHECK_URL where your
# configuration has no metrics listener on 9190 (e.g. http://127.0.0.1:8080/health).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/bun", "-e", "const r = await fetch(process.env.LLMGW_HEALTHCHECK_URL || 'http://127.0.0.1:9190/healthz', { signal: AbortSignal.timeout(4000) }).catch(() => null); process.exit(r?.ok ? 0 : 1)"]

# The entrypoint docs/deploy.md names for supervisors, as the systemd unit runs
# it: bin/llmgw exec's Bun, so the container's pid 1 is the gateway itself and
# `podman stop`'s SIGTERM drains it.
ENTRYPOINT ["/opt/llmgw/bin/llmgw"]
CMD ["serve"]
