#!/usr/bin/env bash
# image.sh: build historyd's container image (what `make image` runs).
#
# Compiles a static bin/image/historyd on the host with the version and
# commit linked in, stages the CA bundle beside it, and builds Containerfile
# with podman, with bin/image as the whole build context. Nothing is pulled.
#
# Environment (each optional):
#   IMAGE           image name without tag (default localhost/historyd);
#                   tagged :$IMAGE_VERSION and :latest
#   IMAGE_VERSION   default: git describe --tags --always --dirty
#   IMAGE_REVISION  default: git rev-parse HEAD
#   IMAGE_CREATED   default: now, or SOURCE_DATE_EPOCH when set (RFC 3339, UTC)
#   IMAGE_SOURCE    default: https://github.com/historyd/historyd
#   IMAGE_LICENSES  SPDX expression for org.opencontainers.image.licenses;
#                   the label is left out while it is empty (the repository
#                   has no license file today)
#   CA_BUNDLE       default: /etc/ssl/certs/ca-certificates.crt
#   PODMAN, GO      the tools (default podman, go)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

PODMAN=${PODMAN:-podman}
GO=${GO:-go}
IMAGE=${IMAGE:-localhost/historyd}
IMAGE_VERSION=${IMAGE_VERSION:-$(git describe --tags --always --dirty)}
IMAGE_REVISION=${IMAGE_REVISION:-$(git rev-parse HEAD)}
if [[ -z ${IMAGE_CREATED:-} ]]; then
  if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
    IMAGE_CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  else
    IMAGE_CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  fi
fi
IMAGE_SOURCE=${IMAGE_SOURCE:-https://github.com/historyd/historyd}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

if ! command -v "$PODMAN" >/dev/null; then
  echo "image.sh: $PODMAN not found; install it (Debian: apt-get install -y podman)" >&2
  exit 1
fi
if [[ ! -s $CA_BUNDLE ]]; then
  echo "image.sh: no CA bundle at $CA_BUNDLE (Debian: apt-get install -y ca-certificates, or set CA_BUNDLE)" >&2
  exit 1
fi

ctx=bin/image
rm -rf "$ctx"
mkdir -p "$ctx"
# A tag is [A-Za-z0-9_.-]; git describe gives that, a custom value may not.
if [[ ! $IMAGE_VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "image.sh: IMAGE_VERSION=$IMAGE_VERSION is not a valid image tag" >&2
  exit 1
fi

echo "image.sh: building $ctx/historyd $IMAGE_VERSION ($IMAGE_REVISION)" >&2
CGO_ENABLED=0 GOOS=linux "$GO" build -trimpath \
  -ldflags "-s -w -X main.version=$IMAGE_VERSION -X main.commit=$IMAGE_REVISION" \
  -o "$ctx/historyd" ./cmd/historyd
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"

labels=()
if [[ -n ${IMAGE_LICENSES:-} ]]; then
  labels+=(--label "org.opencontainers.image.licenses=$IMAGE_LICENSES")
fi

"$PODMAN" build --pull=never -f Containerfile \
  --build-arg "VERSION=$IMAGE_VERSION" \
  --build-arg "REVISION=$IMAGE_REVISION" \
  --build-arg "CREATED=$IMAGE_CREATED" \
  --build-arg "SOURCE=$IMAGE_SOURCE" \
  "${labels[@]}" \
  -t "$IMAGE:$IMAGE_VERSION" -t "$IMAGE:latest" \
  "$ctx"
echo "image.sh: built $IMAGE:$IMAGE_VERSION and $IMAGE:latest" >&2
