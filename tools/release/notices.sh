#!/usr/bin/env bash
# Writes THIRD_PARTY_NOTICES.txt: the licence (and NOTICE) files of every
# module linked into the released binaries, for each platform a release
# builds, taken from the module cache as `go list` resolves them. GoReleaser
# runs it before building (.goreleaser.yaml) and puts the file in each
# archive; a module without a licence file fails it, so the archive never
# ships a dependency unnamed.
#
#   bash tools/release/notices.sh [OUT]     (default THIRD_PARTY_NOTICES.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-THIRD_PARTY_NOTICES.txt}

modules=$(for os in linux darwin; do
  for arch in amd64 arm64; do
    GOOS=$os GOARCH=$arch CGO_ENABLED=0 go list -deps \
      -f '{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}} {{.Dir}}{{end}}{{end}}' \
      ./cmd/acpflow ./cmd/acpflow-sandbox
  done
done | sort -u)

{
  echo "Third-party software in acpflow and acpflow-sandbox"
  echo
  echo "acpflow itself is under the Apache License 2.0 (LICENSE). The binaries link the Go"
  echo "modules below, each under its own licence, reproduced here as the module ships it."
  echo "Code copied into acpflow's repository (go-graphviz, and Graphviz inside it) is listed"
  echo "in docs/third-party.md, with its licence beside it in this archive."
  while read -r mod dir; do
    [ -n "$mod" ] || continue
    files=$(find "$dir" -maxdepth 1 -type f \( -iname 'LICEN[CS]E*' -o -iname 'UNLICEN[CS]E*' -o -iname 'COPYING*' -o -iname 'NOTICE*' \) | sort)
    if [ -z "$files" ]; then
      echo "notices.sh: $mod has no licence file in $dir" >&2
      exit 1
    fi
    for f in $files; do
      printf '\n================================================================================\n'
      printf '%s (%s)\n\n' "$mod" "$(basename "$f")"
      cat "$f"
    done
  done <<<"$modules"
} >"$out"
echo "notices.sh: $(grep -c . <<<"$modules") modules in $out"
