#!/usr/bin/env bash
# distributor demo: validate the example bundle, publish it through Dagster on the embedded
# default (local DAGSTER_HOME, Dagster's default SQLite storage), publish again to show that an
# unchanged source is skipped, and show where the outputs and the runs are.
# Run it with `make demo` (which creates .venv first) or directly: bash scripts/demo.sh
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$PWD"
BIN="${DISTRIBUTOR_BIN:-.venv/bin}"
DISTRIBUTOR="${DISTRIBUTOR:-$BIN/distributor}"
DAGSTER="$BIN/dagster"
BUNDLE=examples/source-bundle
CONFIG=examples/local-publish.yml
JOB=publish_example_source_bundle
OUTPUT=demo-output/local-publish/archive
SOURCE_ASSET=example_source_bundle
ASSET=example_source_bundle/local_archive
export DAGSTER_HOME="${DAGSTER_HOME:-$REPO/.dagster_home}"

step() { printf '\n==> %s\n' "$*"; }

for tool in "$DISTRIBUTOR" "$DAGSTER"; do
    if [ ! -x "$tool" ]; then
        echo "demo: $tool not found; run 'make demo' to create the virtualenv first" >&2
        exit 1
    fi
done

# Dagster's log lines without DEBUG noise and timestamps: "<step> - <message>" (step keys read
# <pipeline>.<step>; events are shown as "<step> <EVENT> (run <id>): ...")
dagster_job() {
    local log
    log="$(mktemp)"
    if ! DISTRIBUTOR_CONFIG="$CONFIG" "$DAGSTER" job execute -m distributor_dagster.definitions -j "$JOB" \
            >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "demo: the Dagster run failed" >&2
        return 1
    fi
    grep -E ' - (INFO|WARNING|ERROR) - | - (ASSET_MATERIALIZATION|ASSET_OBSERVATION|RUN_SUCCESS) - ' "$log" |
        sed -E -e 's/^.* - (INFO|WARNING|ERROR) - [^ ]+ - [^ ]+ - //' \
               -e 's/^.* - ([0-9a-f-]{36}) - [0-9]+ - (([a-z0-9_]+\.)?([a-z0-9_]+) - )?(ASSET_[A-Z]+|RUN_SUCCESS) - /\4 \5 (run \1): /' || true
    rm -f "$log"
}

step "$DISTRIBUTOR version"
"$DISTRIBUTOR" version

step "Validate the example bundle (manifest rules, then every file's size and sha256)"
"$DISTRIBUTOR" validate "$BUNDLE"

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

step "Dagster instance: DAGSTER_HOME=$DAGSTER_HOME (default SQLite storage)"
mkdir -p "$DAGSTER_HOME"
if [ ! -f "$DAGSTER_HOME/dagster.yaml" ]; then
    printf 'telemetry:\n  enabled: false\n' > "$DAGSTER_HOME/dagster.yaml"
fi
rm -rf "$OUTPUT"   # the demo's own destination: start from an empty directory

step "Publish through Dagster: $DAGSTER job execute -m distributor_dagster.definitions -j $JOB"
dagster_job

step "Run it again: the destination already matches, so nothing is written (skip_same)"
dagster_job

step "What landed in $OUTPUT, and the state record that decides the next publication"
ls -la "$OUTPUT"
"$DISTRIBUTOR" inspect "$OUTPUT"

step "Where things are"
echo "outputs:  $REPO/$OUTPUT"
echo "runs:     $DAGSTER_HOME (the two runs above; list them with: DAGSTER_HOME=$DAGSTER_HOME $DAGSTER run list)"
echo "CLI:      $DISTRIBUTOR run --config $CONFIG   (the same publication without Dagster)"

step "Demo finished. Open the asset in the Dagster UI:"
echo "  DAGSTER_HOME=$DAGSTER_HOME DISTRIBUTOR_CONFIG=$CONFIG $DAGSTER dev -w workspace.yaml"
echo "  then browse to http://127.0.0.1:3000/assets/$ASSET"
echo "  (the source $SOURCE_ASSET feeds it; Materialize publishes again and runs its three checks;"
echo "   the Checks tab shows their results, the Events tab both runs above)"
