#!/usr/bin/env bash
# Builds every example policy into wasm/examples/out/*.wasm, printing each
# command. Exits non-zero if any build fails.
#
#   wasm/examples/build.sh            # all of them
#   wasm/examples/build.sh c wat      # only these
#
# RUSTC picks the Rust compiler (default: the first of rustc, /usr/bin/rustc
# whose standard library has a WASI target). npm installs AssemblyScript into
# assemblyscript/node_modules on the first run (npm ci, pinned versions).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p out
out=$PWD/out

run() {
	echo "+ $*" >&2
	"$@"
}

build_go() {
	(cd go && run env GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o "$out/go.wasm" .)
}

build_c() {
	local cc=${CC_WASM:-clang}
	(cd c &&
		run "$cc" --target=wasm32-wasi -O2 -s -o "$out/c.wasm" policy.c json.c &&
		run "$cc" --target=wasm32-wasi -O2 -s -mexec-model=reactor -DPOLICY_REACTOR -o "$out/c-reactor.wasm" policy.c json.c)
}

# rust_target prints the WASI target a rustc can build for, or fails.
rust_target() {
	local rustc=$1 sysroot target
	sysroot=$("$rustc" --print sysroot 2>/dev/null) || return 1
	for target in wasm32-wasip1 wasm32-wasi; do
		if [ -d "$sysroot/lib/rustlib/$target" ]; then
			echo "$target"
			return 0
		fi
	done
	return 1
}

build_rust() {
	local rustc target=""
	for rustc in ${RUSTC:-rustc /usr/bin/rustc}; do
		if target=$(rust_target "$rustc"); then
			break
		fi
	done
	if [ -z "$target" ]; then
		echo "build.sh: no rustc with a wasm32-wasi(p1) standard library (Debian: apt-get install rustc libstd-rust-dev-wasm32)" >&2
		return 1
	fi
	(cd rust && run "$rustc" --edition=2021 --target "$target" -C opt-level=s -C strip=symbols -C panic=abort -C lto \
		-o "$out/rust.wasm" src/main.rs)
}

build_assemblyscript() {
	(cd assemblyscript &&
		if [ ! -x node_modules/.bin/asc ]; then run npm ci --no-audit --no-fund --prefer-offline --fetch-retries=1 --fetch-timeout=30000; fi &&
		run npm run --silent build)
}

build_wat() {
	(cd wat && run wat2wasm policy.wat -o "$out/wat.wasm")
}

examples=("$@")
if [ ${#examples[@]} -eq 0 ]; then
	examples=(go c rust assemblyscript wat)
fi
failed=()
for example in "${examples[@]}"; do
	if ! "build_$example"; then
		failed+=("$example")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "build.sh: failed: ${failed[*]}" >&2
	exit 1
fi
ls -l "$out"
