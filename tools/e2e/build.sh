#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager from
# Go modules (this directory's go.mod) into $E2E_BIN (default
# .cache/e2e-bin at the repository root), skipping binaries already present.
# A full build takes about ten minutes on two cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${E2E_BIN:-$root/.cache/e2e-bin}"
mkdir -p "$out"
cd "$here"
missing=()
for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do
  [ -x "$out/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "building ${missing[*]} into $out" >&2
start=$(date +%s)
go mod download
for b in "${missing[@]}"; do
  # -trimpath and no DWARF keep the binaries smaller; build to a temporary
  # name so an interrupted build never leaves a half-written binary behind.
  go build -trimpath -ldflags='-s -w' -o "$out/.$b.tmp" "./$b"
  mv "$out/.$b.tmp" "$out/$b"
  echo "built $b ($(( $(date +%s) - start ))s)" >&2
done
