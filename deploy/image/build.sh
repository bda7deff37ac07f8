#!/bin/sh
# Builds llmgw's container image from the repository's Dockerfile.
#
# Usage: deploy/image/build.sh [--local-base] [--tag IMAGE] [--ca-file FILE]
#   --tag IMAGE    the image's name (default localhost/llmgw:<package.json version>,
#                  the name deploy/k8s uses)
#   --local-base   build FROM localhost/debian-base:bookworm, made here (once)
#                  with debootstrap from a Debian mirror, for hosts that reach
#                  Debian's mirror but no container registry (root, debootstrap)
#   --ca-file FILE a CA bundle npm trusts during the build (a TLS-intercepting
#                  proxy's), passed as a build secret and kept in no layer;
#                  default: $NODE_EXTRA_CA_CERTS when set, as the host's Node trusts
# Environment: CONTAINER_ENGINE (podman, else docker), DEBIAN_MIRROR (the
# mirror debootstrap and the build's apt use; default deb.debian.org).
set -eu

root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd -P)
version=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$root/package.json")
tag="localhost/llmgw:$version"
local_base=
ca_file=${NODE_EXTRA_CA_CERTS:-}
while [ $# -gt 0 ]; do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --local-base) local_base=1; shift ;;
    --ca-file) ca_file=$2; shift 2 ;;
    *) echo "usage: $0 [--local-base] [--tag IMAGE] [--ca-file FILE]" >&2; exit 2 ;;
  esac
done

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then engine=podman
  elif command -v docker >/dev/null 2>&1; then engine=docker
  else echo "$0: neither podman nor docker is installed" >&2; exit 127
  fi
fi

set -- --network=host --build-arg "LLMGW_VERSION=$version" -t "$tag"
# OCI images have no HEALTHCHECK: podman keeps it in the docker format.
[ "$engine" = podman ] && set -- "$@" --format docker
[ -n "$ca_file" ] && set -- "$@" --secret "id=build_ca,src=$ca_file"

if [ -n "$local_base" ]; then
  base=localhost/debian-base:bookworm
  if ! "$engine" image exists "$base" 2>/dev/null && ! "$engine" image inspect "$base" >/dev/null 2>&1; then
    mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
    rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/llmgw-base.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    echo "$0: making $base with debootstrap from $mirror" >&2
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
    # What the registry's debian:bookworm-slim also does: no apt caches kept.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "$engine" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["/bin/bash"]' - "$base"
    rm -rf "$rootfs"
    trap - EXIT
  fi
  set -- "$@" --build-arg "BASE_IMAGE=$base"
fi

exec "$engine" build "$@" "$root"
