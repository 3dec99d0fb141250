#
# gpuportal's two images, from one base image and this one file:
#
#   server (the default target): the portal, API and scheduler
#       ("gpuportal serve"), as the unprivileged user gpuportal (UID 10001);
#   agent: "gpuportal agent" for a GPU machine, as root, with podman for
#       container jobs (root: see below).
#
# Both hold the same binary, built here with cgo and the nvml tag so that
# "gpuportal agent --gpus nvml" reads NVIDIA GPUs; NVML itself
# (libnvidia-ml.so.1) comes from the host's driver at run time.
#
#   docker build --target server -t gpuportal-server \
#       --build-arg VERSION=v1.2.0 --build-arg REVISION=$(git rev-parse HEAD) \
#       --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
#   docker build --target agent -t gpuportal-agent --build-arg VERSION=v1.2.0 ... .
#
# (podman build and buildah bud work the same, with --format docker:
# their default OCI format drops HEALTHCHECK. No BuildKit frontend is
# needed: this file has no "syntax" line on purpose.)
#
# What the build fetches, and nothing else: the base image debian:trixie-slim
# (a registry-less site mirrors that one image into its own registry and
# builds with --build-arg BASE=registry.example.com/debian:trixie-slim),
# Debian packages (from the base image's apt sources, or a Debian mirror),
# and Go modules and the Go toolchain from the Go module proxy ($GOPROXY,
# or a proxy such as Athens mirroring it: --build-arg GOPROXY=...).
# Debian's golang-go is older than go.mod asks for; GOTOOLCHAIN makes it
# fetch the Go release below as the module golang.org/toolchain from the
# same proxy. See docs/operations.md, "The images".
#
# Version stamp: VERSION (and REVISION, the commit) go into the binary with
# -ldflags -X, so that "gpuportal --version", GET /api/v1/version and
# gpuportal_build_info say them, and into the OCI labels, with CREATED.
#
# No container engine runs in CI: cmd/gpuportal/dockerfile_test.go runs
# the "go build" line below with the same environment, flags and default
# build arguments, checks the stamp, and checks the rest of this file.
# Keep that line one command: words, "double quotes" and ${ARG}s only.

ARG BASE=debian:trixie-slim

FROM ${BASE} AS build
ARG GOPROXY=https://proxy.golang.org,direct
ARG GOTOOLCHAIN=go1.26.8
ENV GOPROXY=${GOPROXY} GOTOOLCHAIN=${GOTOOLCHAIN} GOFLAGS=-buildvcs=false
RUN apt-get update \
 && apt-get install -y --no-install-recommends golang-go gcc libc6-dev ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download && go version
COPY . .
ARG VERSION=dev
ARG REVISION=
RUN CGO_ENABLED=1 go build -tags nvml -ldflags "-X github.com/gpuportal/gpuportal/core/buildinfo.version=${VERSION} -X github.com/gpuportal/gpuportal/core/buildinfo.revision=${REVISION}" -o /out/gpuportal ./cmd/gpuportal
# srun for container jobs: static (no cgo), since it runs in the jobs'
# images, not on this base (docs/slurm.md, "srun inside a job").
RUN CGO_ENABLED=0 go build -o /out/gpuportal-srun ./cmd/gpuportal-srun

# The agent: root, because it starts each job as its owner's Unix account
# (--run-as owner: setuid/setgid to the owner, who may not be root), writes
# jobs' cgroups, and runs container jobs with podman as their owners. The
# jobs themselves never run as root (refused unless --allow-root-owner).
FROM ${BASE} AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates podman crun uidmap fuse-overlayfs \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/gpuportal-agent
# Build arguments after the packages, so that a new version or build
# time does not install them again.
ARG VERSION=dev
ARG REVISION=
ARG CREATED=
LABEL org.opencontainers.image.title="gpuportal-agent" \
      org.opencontainers.image.description="gpuportal node agent: runs jobs on a GPU machine" \
      org.opencontainers.image.source="https://github.com/gpuportal/gpuportal" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /out/gpuportal /usr/local/bin/gpuportal
# Beside the agent's binary, where the agent finds it.
COPY --from=build /out/gpuportal-srun /usr/local/bin/gpuportal-srun
USER root
WORKDIR /var/lib/gpuportal-agent
# Jobs' work folders, output and checkpoints; keep them across restarts.
VOLUME /var/lib/gpuportal-agent
# The server comes from $GPUPORTAL_SERVER (or --server), the token from
# $GPUPORTAL_AGENT_TOKEN. Healthy: a server answers /readyz.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["gpuportal", "agent", "--check"]
ENTRYPOINT ["gpuportal"]
CMD ["agent", "--run-as", "owner", "--container-runtime", "podman", "--work-dir", "/var/lib/gpuportal-agent"]

# The server (the default target: last).
FROM ${BASE} AS server
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gpuportal \
 && useradd --system --uid 10001 --gid gpuportal --home-dir /data --no-create-home --shell /usr/sbin/nologin gpuportal \
 && mkdir /data \
 && chown gpuportal:gpuportal /data
# Build arguments after the packages, so that a new version or build
# time does not install them again.
ARG VERSION=dev
ARG REVISION=
ARG CREATED=
LABEL org.opencontainers.image.title="gpuportal-server" \
      org.opencontainers.image.description="gpuportal: GPU cluster manager, portal, API and scheduler" \
      org.opencontainers.image.source="https://github.com/gpuportal/gpuportal" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /out/gpuportal /usr/local/bin/gpuportal
USER 10001:10001
WORKDIR /data
# The SQLite database (unless --db names PostgreSQL) and the output of
# jobs run by remote agents.
VOLUME /data
EXPOSE 8080
# Healthy: the server answers its own /readyz (the probe agent --check
# makes; it needs no token).
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["gpuportal", "agent", "--check", "--server", "http://127.0.0.1:8080"]
ENTRYPOINT ["gpuportal"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data", "/data"]
