#!/bin/sh
# scripts/dev/style-check.sh [BASE]: clang-format (.clang-format at the repo root) on the lines of *.c *.h *.cu
# *.cc that differ between BASE (default HEAD) and the working tree, staged or not, and in untracked files.
# Lines not changed are never judged: the existing code is not clang-format clean as a whole.
# Prints the suggested diff; exit 0 formatted, 1 a changed line is not, 2 cannot check (no
# clang-format-diff, bad BASE, not a git tree). CLANG_FORMAT_DIFF and CLANG_FORMAT override the tools.
base=${1:-HEAD}
top=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "style-check: not inside a git work tree" >&2; exit 2; }
cd "$top" || exit 2

# The first that exists: the override, the unversioned name, the highest versioned one, Debian's .py.
first_of() {
    for c in "$@"; do
        case $c in
        */*) [ -x "$c" ] && { echo "$c"; return 0; } ;;
        *) command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; } ;;
        esac
    done
    return 1
}
versioned() {   # NAME-NN on PATH (clang-format-14, clang-format-diff-14), highest NN first
    IFS=:
    for d in $PATH; do ls "$d" 2>/dev/null | grep -E "^$1-[0-9]+\$"; done | sort -rV | uniq
    unset IFS
}
cfd=$(first_of ${CLANG_FORMAT_DIFF:-} clang-format-diff $(versioned clang-format-diff) \
      $(ls -r /usr/share/clang/clang-format-*/clang-format-diff.py 2>/dev/null))
cf=$(first_of ${CLANG_FORMAT:-} clang-format $(versioned clang-format))
if [ -z "$cfd" ] || [ -z "$cf" ]; then
    [ -z "$cfd" ] && missing=clang-format-diff || missing=clang-format
    echo "style-check: $missing is missing: install Debian's clang-format package" \
         "(apt-get install clang-format), or set CLANG_FORMAT_DIFF and CLANG_FORMAT" >&2
    exit 2
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    echo "style-check: '$base' is not a commit (try HEAD, HEAD~3, origin/main)" >&2
    exit 2
fi

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
set -- '*.c' '*.h' '*.cu' '*.cc'
git diff -U0 --no-color --no-ext-diff "$base" -- "$@" >"$tmp/diff" || { echo "style-check: git diff failed" >&2; exit 2; }
git ls-files --others --exclude-standard -z -- "$@" | tr '\0' '\n' | while IFS= read -r f; do
    git diff --no-index -U0 --no-color --no-ext-diff /dev/null "$f"
done >>"$tmp/diff"

if ! "$cfd" -p1 -iregex '.*\.(c|h|cu|cc)' -style file -binary "$cf" <"$tmp/diff" >"$tmp/out" 2>"$tmp/err"; then
    # clang-format-diff 15 and later exit 1 when they print a diff; anything else is a failure to check.
    if [ ! -s "$tmp/out" ] || [ -s "$tmp/err" ]; then
        cat "$tmp/err" >&2
        echo "style-check: $cfd failed (an option in .clang-format that $cf does not know?)" >&2
        exit 2
    fi
fi
if [ -s "$tmp/out" ]; then
    cat "$tmp/out"
    files=$(awk -F'\t' '/^\+\+\+ / { print substr($1, 5) }' "$tmp/out" | sort -u | tr '\n' ' ')
    echo "style-check: changed lines not formatted in: $files" >&2
    echo "style-check: to apply: git diff -U0 $base | $cfd -p1 -i -binary $cf" >&2
    exit 1
fi
echo "style-check: changed lines since $base are formatted"
exit 0
