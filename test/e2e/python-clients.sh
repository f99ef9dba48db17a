#!/usr/bin/env bash
# The official Python clients against a real server on the default model: `openai` (Responses),
# `anthropic` (Messages) and the OpenAI Agents SDK (`openai-agents`), installed from PyPI into their
# own virtualenv under .cache when missing, run unmodified by test/e2e/python/clients.py.
#
#   test/e2e/python-clients.sh
#
# Prints one `python-clients: <check> ok` line per check; exits non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH"

PACKAGES=(openai==3.57.0 openai-agents==0.24.0 anthropic==2.10.0)
MODEL=smollm2-135m-instruct

cache="${ORTSERVE_CACHE_DIR:-$PWD/.cache}/python-clients"
venv="$cache/venv-$(echo "${PACKAGES[*]}" | sha256sum | head -c 12)"
# A virtualenv that no longer runs (its scripts name the interpreter by the path it was made at,
# so a moved cache breaks them) is made again.
if ! "$venv/bin/python" -c "import agents, anthropic, openai" >/dev/null 2>&1; then
  echo "installing ${PACKAGES[*]} into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "${PACKAGES[@]}" 2> >(grep -v "^WARNING: Location" >&2)
fi

work="$(mktemp -d)"
key="osk-py-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)"
ORTSERVE_API_KEY="$key" node src/cli/main.ts serve --no-setup --port 0 --db "$work/ortserve.db" \
  --max-num-seqs 8 >"$work/server.out" 2>"$work/server.err" &
server=$!
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
url=""
for _ in $(seq 1 120); do
  url="$(sed -n 's/^ortserve: serving on //p' "$work/server.err")"
  [[ -n "$url" ]] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
  sleep 0.5
done
[[ -n "$url" ]] || { echo "server did not start" >&2; exit 1; }

"$venv/bin/python" test/e2e/python/clients.py "$url" "$key" "$MODEL"
