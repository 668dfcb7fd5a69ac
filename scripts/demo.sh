#!/usr/bin/env bash
# distributor demo: check the example source bundle with the installed CLI.
# Run it with `make demo` (which creates .venv first) or directly: bash scripts/demo.sh
set -euo pipefail

cd "$(dirname "$0")/.."
DISTRIBUTOR="${DISTRIBUTOR:-.venv/bin/distributor}"
BUNDLE=examples/source-bundle

step() { printf '\n==> %s\n' "$*"; }

if [ ! -x "$DISTRIBUTOR" ]; then
    echo "demo: $DISTRIBUTOR not found; run 'make demo' to create the virtualenv first" >&2
    exit 1
fi

step "$DISTRIBUTOR version"
"$DISTRIBUTOR" version

step "Validate the example bundle (manifest rules, then every file's size and sha256)"
"$DISTRIBUTOR" validate "$BUNDLE"

step "Inspect it: manifest and per-file checksums"
"$DISTRIBUTOR" inspect "$BUNDLE"

step "The same as JSON for automation"
"$DISTRIBUTOR" validate --format json "$BUNDLE"

step "A changed file is caught before anything is published"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp -R "$BUNDLE" "$scratch/bundle"
printf 'edited after the manifest was written\n' >> "$scratch/bundle/summary.txt"
if "$DISTRIBUTOR" validate "$scratch/bundle"; then
    echo "demo: expected validation to fail" >&2
    exit 1
else
    echo "(exit code $? as expected)"
fi

step "Publish it to a local destination (examples/local-publish.yml -> demo-output/local-publish/archive)"
"$DISTRIBUTOR" run --config examples/local-publish.yml --dry-run
"$DISTRIBUTOR" run --config examples/local-publish.yml

step "Run it again: the destination already matches, so nothing is written (skip_same)"
"$DISTRIBUTOR" run --config examples/local-publish.yml

step "What landed, and the state record that decides the next publication"
ls -la demo-output/local-publish/archive
"$DISTRIBUTOR" inspect demo-output/local-publish/archive

step "Demo finished"
