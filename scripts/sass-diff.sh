#!/usr/bin/env bash
# Which entry points of two builds' PTX compile to the same SASS: `scripts/sass-diff.sh
# OLD.ptx NEW.ptx [ARCH]` (ARCH defaults to sm_90a; the PTX of a build is
# target/release/build/host-*/out/<target>.ptx, and scripts/build-for-device.sh copies the
# Hopper one to .gpu/sm90a.ptx). ptxas compiles each entry as a whole, so a change meant for
# one entry can move another's code; an entry whose SASS is unchanged runs as measured
# before (docs/perf-notes.md, session 30). Needs ptxas and cuobjdump on PATH.
set -euo pipefail
old=$1 new=$2 arch=${3:-sm_90a}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ptxas -arch="$arch" "$old" -o "$work/old.cubin"
ptxas -arch="$arch" "$new" -o "$work/new.cubin"
functions() { cuobjdump -sass "$1" | sed -n 's/.*Function : \([A-Za-z0-9_]*\).*/\1/p' | sort; }
sass() { cuobjdump -sass -fun "$1" "$2" | md5sum | cut -c1-32; }
functions "$work/old.cubin" > "$work/old.list"
functions "$work/new.cubin" > "$work/new.list"
for f in $(sort -u "$work/old.list" "$work/new.list"); do
  if ! grep -qx "$f" "$work/old.list"; then echo "new      $f"
  elif ! grep -qx "$f" "$work/new.list"; then echo "removed  $f"
  elif [ "$(sass "$f" "$work/old.cubin")" = "$(sass "$f" "$work/new.cubin")" ]; then echo "same     $f"
  else echo "differs  $f"; fi
done
