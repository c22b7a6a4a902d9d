#!/usr/bin/env bash
# Runs gpulint for the GitHub Action (action.yml): SARIF to INPUT_SARIF_FILE, annotations
# (`--output-format github`), a per-rule count in the job summary, and the exit code that
# INPUT_FAIL_ON asks for. Inputs come in the environment: INPUT_ARGS, INPUT_PATHS,
# INPUT_FAIL_ON, INPUT_SARIF_FILE. gpulint must be on PATH (action-install.sh).
set -o pipefail
set -f # inputs are words, not globs
out="${GITHUB_OUTPUT:-/dev/null}"
# shellcheck disable=SC2206 # word splitting is the interface: arguments separated by spaces
extra=(${INPUT_ARGS:-})
# shellcheck disable=SC2206
paths=(${INPUT_PATHS:-.})
[ ${#paths[@]} -gt 0 ] || paths=(.)
case "${INPUT_FAIL_ON:-warning}" in
  error | warning | info) gate=(--fail-on "${INPUT_FAIL_ON:-warning}") ;;
  never) gate=(--exit-zero) ;;
  *)
    echo "::error title=gpulint::fail-on must be error, warning, info or never, not '${INPUT_FAIL_ON}'"
    echo "exit-code=2" >> "$out"
    exit 2
    ;;
esac

if [ -n "${INPUT_SARIF_FILE:-}" ]; then
  gpulint check "${extra[@]}" --quiet --exit-zero --output-format sarif -o "$INPUT_SARIF_FILE" -- "${paths[@]}"
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "exit-code=$rc" >> "$out"
    exit "$rc"
  fi
  echo "sarif-file=$INPUT_SARIF_FILE" >> "$out"
fi

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    echo "### gpulint"
    stats=$(gpulint check "${extra[@]}" --quiet --exit-zero --statistics -- "${paths[@]}" 2>&1)
    if [ -n "$stats" ]; then
      echo '```text'
      echo "$stats"
      echo '```'
    else
      echo "No findings."
    fi
  } >> "$GITHUB_STEP_SUMMARY"
fi

gpulint check "${extra[@]}" "${gate[@]}" --output-format github -- "${paths[@]}"
rc=$?
echo "exit-code=$rc" >> "$out"
exit "$rc"
