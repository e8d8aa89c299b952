#!/usr/bin/env bash
# Fails when git tracks a build output: an executable that is not a script
# (no #! line), an ELF/Mach-O/PE binary, or any file over 1 MB outside a
# testdata directory. Called by make lint.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46|cffaedfe|cefaedfe|feedfacf|4d5a*)
      echo "tracked binary: $f (a build output? remove it with git rm --cached and add it to .gitignore)"
      bad=1
      continue
      ;;
  esac
  if [ -x "$f" ] && [ "$(head -c 2 "$f")" != "#!" ]; then
    echo "tracked executable without a #! line: $f (chmod -x it, or remove it if it is a build output)"
    bad=1
  fi
  case "/$f" in
    */testdata/*) ;;
    *)
      size=$(stat -c %s "$f")
      if [ "$size" -gt "$limit" ]; then
        echo "tracked file over 1 MB outside testdata: $f ($size bytes)"
        bad=1
      fi
      ;;
  esac
done < <(git ls-files -z)
exit "$bad"
