#!/usr/bin/env bash
# Builds one multi-architecture OCI image per enipam binary, offline: a
# static binary cross-compiled for each of $platforms (CGO_ENABLED=0, no
# emulation: the images are FROM scratch and run nothing while built),
# written as an OCI archive holding one image index with every platform,
# _out/images/<name>-<version>.tar, tagged <registry>/<name>:<version> (the
# chart's default image references: repository ghcr.io/enipam/<name>, tag
# the chart's appVersion). The binaries report that version (--version,
# stamped with -X) and the images carry it in their labels
# (org.opencontainers.image.version, .source, .revision when git knows
# the commit).
#
#   hack/images.sh            build with podman, buildah or docker (the first found)
#   hack/images.sh --list     print the image references it builds, one a line
#   hack/images.sh --builder  print the builder it would use (nothing: none)
#
# IMAGES_OUT overrides the output folder, IMAGE_REGISTRY the registry,
# IMAGE_PLATFORMS the platforms (default: linux/amd64 linux/arm64).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/enipam/Chart.yaml)
registry=${IMAGE_REGISTRY:-ghcr.io/enipam}
out=${IMAGES_OUT:-_out/images}
platforms=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
source=https://github.com/enipam/enipam
revision=$(git rev-parse HEAD 2>/dev/null || true)

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
labels=(
  --label "org.opencontainers.image.version=$version"
  --label "org.opencontainers.image.source=$source"
)
[ -n "$revision" ] && labels+=(--label "org.opencontainers.image.revision=$revision")

mkdir -p "$out"
for entry in "${images[@]}"; do
  read -r name pkg containerfile <<<"$entry"
  ref="$registry/$name:$version"
  ctx="$out/context/$name"
  rm -rf "$ctx" && mkdir -p "$ctx"
  echo "==> $ref ($builder: $platforms)"
  for platform in $platforms; do
    arch=${platform#linux/}
    # Same compile flags as make test (no -trimpath), so the build cache
    # serves the host's architecture but for the few packages with cgo
    # variants.
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build \
      -ldflags "-s -w -X github.com/enipam/enipam/internal/version.Version=$version" \
      -o "$ctx/$arch/$name" "$pkg"
  done
  archive="$out/$name-$version.tar"
  rm -f "$archive"
  case $builder in
    podman|buildah)
      # One image per platform, gathered in a manifest list (an OCI image
      # index) under a name of this run's own (an image already tagged
      # $ref in local storage must not collide with it), pushed whole into
      # the archive as $ref; the local copies are removed after.
      list="localhost/enipam-images/$name:$$"
      $builder manifest create "$list" >/dev/null
      ids=()
      for platform in $platforms; do
        $builder build --quiet --isolation chroot --format oci --platform "$platform" \
          --build-arg "TARGETARCH=${platform#linux/}" "${labels[@]}" \
          --iidfile "$ctx/iid" --manifest "$list" -f "$containerfile" "$ctx" >/dev/null
        ids+=("$(cat "$ctx/iid")")
      done
      $builder manifest push --quiet --all --format oci "$list" "oci-archive:$archive:$ref" >/dev/null
      $builder manifest rm "$list" >/dev/null
      $builder rmi "${ids[@]}" >/dev/null 2>&1 || true ;;
    docker)
      docker buildx build --quiet --platform "${platforms// /,}" "${labels[@]}" -f "$containerfile" \
        -t "$ref" --output "type=oci,dest=$archive" "$ctx" >/dev/null ;;
  esac
  echo "    $archive"
done
