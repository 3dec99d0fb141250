# syntax=docker/dockerfile:1
#
# gpuportal in one image: the portal, API and scheduler ("serve", the
# default), and the same binary for node agents ("agent") and admin
# commands ("admin"). See docs/operations.md.
#
#   docker build -t gpuportal .
#   docker run -p 8080:8080 -v gpuportal-data:/data gpuportal
#
# The binary is built with cgo and the nvml build tag, so that
# "gpuportal agent --gpus nvml" reads NVIDIA GPUs. NVML itself
# (libnvidia-ml.so.1) comes from the host's driver at run time: run an
# agent with "docker run --gpus all" and the NVIDIA Container Toolkit.
#
# Version stamp: .dockerignore leaves .git out of the build context, so
# the image knows its commit only where the go build line names it, as
# "gpuportal --version" and GET /api/v1/version then show. A release adds
# one word to that line (no shell syntax there), such as
#   -ldflags=-X=github.com/gpuportal/gpuportal/core/buildinfo.version=v1.2.0
# (buildinfo.revision and buildinfo.commitTime may be set so too).
#
# No Docker engine runs in CI: cmd/gpuportal/dockerfile_test.go runs the
# "go build" line below with the same environment and flags, and checks the
# rest of this file. Keep that line one plain command.

FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -tags nvml -o /out/gpuportal ./cmd/gpuportal

FROM debian:trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gpuportal \
 && useradd --system --uid 10001 --gid gpuportal --home-dir /data --no-create-home --shell /usr/sbin/nologin gpuportal \
 && mkdir /data \
 && chown gpuportal:gpuportal /data
COPY --from=build /out/gpuportal /usr/local/bin/gpuportal
USER 10001:10001
WORKDIR /data
# The SQLite database (unless --db names PostgreSQL) and the output of
# jobs run by remote agents.
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["gpuportal"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data", "/data"]
