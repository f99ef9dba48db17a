#!/usr/bin/env bash
# Generated inputs against /openapi.json with a valid key: schemathesis (installed from PyPI into
# its own virtualenv under .cache when missing) runs every operation of the document against a
# server on the synthetic model, and the run is summarised as cases, 5xx answers and schema
# violations (undocumented status codes, content types, headers or bodies).
#
#   test/fuzz/schemathesis.sh           short run (a few hundred cases, for CI)
#   test/fuzz/schemathesis.sh --long    >= 5,000 cases
#   CHECKS=<list> test/fuzz/schemathesis.sh
#                                       only those checks; by default every check runs,
#                                       positive_data_acceptance (schema-valid requests accepted) and
#                                       negative_data_rejection included
#
# Exits non-zero when any answer is a 5xx or breaks the documented schema.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH"

VERSION=4.32.5
examples=25
if [[ "${1:-}" == "--long" ]]; then examples=600; shift; fi

cache="${ORTSERVE_CACHE_DIR:-$PWD/.cache}/schemathesis"
venv="$cache/venv-$VERSION"
# A virtualenv that no longer runs (its scripts name the interpreter by the path it was made at,
# so a moved cache breaks them) is made again.
if ! "$venv/bin/schemathesis" --version >/dev/null 2>&1; then
  echo "installing schemathesis $VERSION into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "schemathesis==$VERSION" 2> >(grep -v "^WARNING: Location" >&2)
fi

work="$(mktemp -d)"
: >"$work/server.out"
key="osk-fuzz-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)"
ORTSERVE_API_KEY="$key" node test/fuzz/serve-synthetic.ts >"$work/server.out" 2>"$work/server.err" &
server=$!
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [[ -n "${KEEP:-}" ]]; then cp -r "$work" "$KEEP"; fi
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  url="$(sed -n 's/^ready //p' "$work/server.out")"
  [[ -n "$url" ]] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
  sleep 0.5
done
[[ -n "$url" ]] || { echo "server did not start" >&2; exit 1; }

status=0
# use_after_free is left out: DELETE /v1/preview/models/{model_id}/checkpoints removes the
# checkpoints its body names, not the collection at its path, which still lists (200) afterwards.
# Run from the temporary directory: schemathesis keeps a crash cache in its working directory.
hooks="$PWD/test/fuzz"
# The hooks' one source for the schema keywords structured outputs refuse.
refused=$(node --input-type=module -e \
  'const m = await import(process.argv[1]); console.log(JSON.stringify(m.REFUSED_SCHEMA_KEYWORDS))' \
  "$PWD/src/core/structured/schema-support.ts")
(cd "$work" && ORTSERVE_REFUSED_SCHEMA_KEYWORDS="$refused" SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH="$hooks" "$venv/bin/schemathesis" run "$url/openapi.json" \
  -H "Authorization: Bearer $key" \
  --checks "${CHECKS:-all}" \
  --exclude-checks use_after_free \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "$examples" \
  --workers 2 \
  --request-timeout 60 \
  --seed "${SEED:-1}" \
  --suppress-health-check all \
  --report ndjson --report-ndjson-path "$work/events.ndjson" \
  --output-truncate true \
  "$@" >"$work/schemathesis.out" 2>&1) || status=$?
# The ERRORS section comes before the summary and can be long: print it whole, then the summary.
sed -n '/ ERRORS /,/Need more help?/p' "$work/schemathesis.out"
tail -n 60 "$work/schemathesis.out"

# Count from the event stream: every response with its status, and every failed check by name.
summary=0
python3 - "$work/events.ndjson" <<'PY' || summary=$?
import collections, json, sys

cases = 0
server_errors = 0
failures = collections.Counter()
for line in open(sys.argv[1]):
    event = json.loads(line)
    for name, body in event.items():
        if name != "ScenarioFinished":
            continue
        recorder = body.get("recorder") or {}
        for interactions in (recorder.get("interactions") or {}).values():
            response = (interactions or {}).get("response")
            if response is None:
                continue
            cases += 1
            if response.get("status_code", 0) >= 500:
                server_errors += 1
        for checks in (recorder.get("checks") or {}).values():
            for check in checks:
                if str(check.get("status")).lower() == "failure":
                    failures[check.get("name")] += 1
print(f"schemathesis: {cases} cases, {server_errors} responses >= 500, "
      f"{sum(failures.values())} failed checks {dict(failures)}")
sys.exit(1 if server_errors or failures else 0)
PY
exit $(( status != 0 ? status : summary ))
