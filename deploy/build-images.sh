#!/usr/bin/env bash
# Builds the images deploy/compose.yaml runs: a Debian base (debootstrap, skipped when present),
# the application image (Dockerfile), PostgreSQL and the nginx proxy. Nothing is pulled.
#
# Environment:
#   BASE            base image to build from (default learning-bot-base:bookworm; give
#                   python:3.11-slim where a registry is reachable to skip debootstrap for the app)
#   DEBIAN_MIRROR   mirror for debootstrap (default: the first Debian URI apt uses here)
#   PIP_INDEX_URL   package index for the application build (default: pip's configured
#                   global.index-url, else pip's default index)
#   EXTRA_CA_CERTS  PEM certificates the application build trusts (default: the ones added to
#                   this machine in /usr/local/share/ca-certificates), for a TLS-inspecting proxy
#   TAG             tag of the application image (default latest)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BASE:-learning-bot-base:bookworm}"
TAG="${TAG:-latest}"
SUITE=bookworm
DEBIAN_BASE=learning-bot-base:$SUITE

seconds() { date +%s; }

apt_mirror() {
  # The Debian archive apt already uses on this machine (deb822 or one-line sources).
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
    2>/dev/null |
    awk '/^URIs:/ {print $2} /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' |
    grep -E '/debian/?$' | head -n 1 || true
}

# The postgres and proxy images always build from the Debian base, whatever BASE the app uses.
if ! docker image inspect "$DEBIAN_BASE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "debootstrap is needed to build $DEBIAN_BASE" >&2; exit 1; }
  mirror="${DEBIAN_MIRROR:-$(apt_mirror)}"
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  start=$(seconds)
  echo "building $DEBIAN_BASE with debootstrap from ${mirror:-the default mirror of debootstrap}"
  debootstrap --variant=minbase "$SUITE" "$root" ${mirror:+"$mirror"} >/dev/null
  # Keep the image small: no apt lists, caches, docs or man pages.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*
  tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' - "$DEBIAN_BASE" >/dev/null
  rm -rf "$root"
  trap - EXIT
  echo "base image built in $(($(seconds) - start))s"
else
  echo "base image $DEBIAN_BASE present, reused"
fi

index="${PIP_INDEX_URL:-$(pip config get global.index-url 2>/dev/null || true)}"
extra_ca="${EXTRA_CA_CERTS:-$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)}"

start=$(seconds)
docker build -q -t "learning-bot:$TAG" --build-arg BASE="$BASE" \
  --build-arg PIP_INDEX_URL="$index" --build-arg EXTRA_CA_CERTS="$extra_ca" .
echo "application image built in $(($(seconds) - start))s"

start=$(seconds)
docker build -q -t learning-bot-postgres:15 --build-arg BASE="$DEBIAN_BASE" deploy/postgres
docker build -q -t learning-bot-proxy:latest --build-arg BASE="$DEBIAN_BASE" deploy/proxy
echo "postgres and proxy images built in $(($(seconds) - start))s"
