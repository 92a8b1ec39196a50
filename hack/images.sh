#!/usr/bin/env bash
# Builds one OCI image per enipam binary, offline: a static binary on an
# empty base (FROM scratch, no registry needed), written as an OCI archive
# to _out/images/<name>-<version>.tar and tagged <registry>/<name>:<version>
# (the chart's default image references: repository ghcr.io/enipam/<name>,
# tag the chart's appVersion).
#
#   hack/images.sh            build with podman, buildah or docker (the first found)
#   hack/images.sh --list     print the image references it builds, one a line
#   hack/images.sh --builder  print the builder it would use (nothing: none)
#
# IMAGES_OUT overrides the output folder, IMAGE_REGISTRY the registry.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/enipam/Chart.yaml)
registry=${IMAGE_REGISTRY:-ghcr.io/enipam}
out=${IMAGES_OUT:-_out/images}

# name, main package, Containerfile
images=(
  "enipam-operator ./operator/cmd/enipam-operator operator/Containerfile"
  "enipam-agent ./nodeagent/cmd/enipam-agent nodeagent/Containerfile"
)
if [ -f scheduler/Containerfile ]; then
  images+=("enipam-scheduler ./scheduler/cmd/enipam-scheduler scheduler/Containerfile")
fi

if [ "${1:-}" = --list ]; then
  for entry in "${images[@]}"; do
    read -r name _ _ <<<"$entry"
    echo "$registry/$name:$version"
  done
  exit 0
fi

# A builder that can work here: podman or buildah, or docker with buildx
# and a daemon (docker's own builder cannot write an OCI archive).
builder=""
for b in podman buildah docker; do
  command -v "$b" >/dev/null 2>&1 || continue
  if [ "$b" = docker ] && ! { docker buildx version && docker info; } >/dev/null 2>&1; then
    continue
  fi
  builder=$b
  break
done
if [ "${1:-}" = --builder ]; then
  [ -n "$builder" ] && echo "$builder"
  exit 0
fi
if [ -z "$builder" ]; then
  echo "images: no podman, buildah, or docker with buildx and a daemon found; install one (Debian: apt-get install buildah)" >&2
  exit 2
fi
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$ca" ]; then
  echo "images: no CA bundle at $ca (Debian: apt-get install ca-certificates)" >&2
  exit 2
fi

mkdir -p "$out"
for entry in "${images[@]}"; do
  read -r name pkg containerfile <<<"$entry"
  ref="$registry/$name:$version"
  ctx="$out/context/$name"
  rm -rf "$ctx" && mkdir -p "$ctx"
  echo "==> $ref ($builder)"
  # Same compile flags as make test (no -trimpath), so the build cache
  # serves every package but the few with cgo variants.
  CGO_ENABLED=0 go build -ldflags "-s -w" -o "$ctx/$name" "$pkg"
  cp "$ca" "$ctx/ca-certificates.crt"
  archive="$out/$name-$version.tar"
  rm -f "$archive"
  case $builder in
    podman)
      podman build --quiet --isolation chroot -f "$containerfile" -t "$ref" "$ctx" >/dev/null
      podman save --format oci-archive -o "$archive" "$ref" ;;
    buildah)
      buildah bud --quiet --isolation chroot -f "$containerfile" -t "$ref" "$ctx" >/dev/null
      buildah push --quiet "$ref" "oci-archive:$archive" ;;
    docker)
      docker buildx build --quiet -f "$containerfile" -t "$ref" --output "type=oci,dest=$archive" "$ctx" >/dev/null ;;
  esac
  echo "    $archive"
done
