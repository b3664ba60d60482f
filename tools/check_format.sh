#!/usr/bin/env bash
# The C++ and CUDA sources changed since a base commit (committed, staged or not, or new) must
# be as clang-format (.clang-format: Google style, 100 columns) writes them. The base is
# .ci/format-base's commit (where the check began: files untouched since keep their layout until
# they are next changed), or the first argument.
#   bash tools/check_format.sh            check
#   bash tools/check_format.sh --fix      rewrite those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1 && shift
base=${1:-$(cat .ci/format-base)}
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is missing (tools/setup.sh installs it)" >&2
  exit 1
fi
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "check_format: the base commit $base is not in this clone (a shallow one?)" >&2
  exit 1
fi
mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" HEAD -- \
                       '*.cpp' '*.h' '*.cu' '*.cuh'; git diff --name-only --diff-filter=AMR -- \
                       '*.cpp' '*.h' '*.cu' '*.cuh'; git ls-files --others --exclude-standard -- \
                       '*.cpp' '*.h' '*.cu' '*.cuh')
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ ${#files[@]} -eq 0 ]; then
  echo "check_format: no C++ or CUDA file changed since $base"
  exit 0
fi
if [ $fix = 1 ]; then
  clang-format -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files changed since $base are not formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: bash tools/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files changed since $base are formatted"
