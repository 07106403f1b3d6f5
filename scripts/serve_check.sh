#!/usr/bin/env bash
# The explorer (`dtsim serve`) in Debian's headless Chromium, outside ctest: every browser test
# (tests/browser/explorer_test.py; ctest runs the same ones under the label `system`), then the
# pictures in docs/img/ (a lesson, predict-then-reveal, a phone's width), 256 colours each.
#   scripts/serve_check.sh [build dir, default build] [picture folder, default docs/img]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-docs/img}
python=/usr/bin/python3
[ -x "$python" ] || python=python3
command -v chromium > /dev/null || { echo "serve_check: no chromium (scripts/packages.sh lists chromium, chromium-driver, python3-selenium)"; exit 77; }
test=tests/browser/explorer_test.py
for lesson in reports/lessons/*.json; do
  "$python" "$test" --dtsim "$build/dtsim" lesson "$(basename "$lesson" .json)"
done
"$python" "$test" --dtsim "$build/dtsim" url
"$python" "$test" --dtsim "$build/dtsim" phone
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
"$python" "$test" --dtsim "$build/dtsim" screenshots "$raw"
mkdir -p "$out"
# A page of text and flat colours: 256 colours lose nothing visible and a third of the bytes.
"$python" - "$raw" "$out" <<'PY'
import os, shutil, sys
raw, out = sys.argv[1:]
try:
    from PIL import Image  # Debian's python3-pil; without it the pictures are copied as taken
except ImportError:
    Image = None
for name in sorted(os.listdir(raw)):
    if Image is None:
        shutil.copy(os.path.join(raw, name), os.path.join(out, name))
    else:
        img = Image.open(os.path.join(raw, name)).convert("RGB")
        img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(os.path.join(out, name), optimize=True)
    print(f"{out}/{name}: {os.path.getsize(os.path.join(out, name))} bytes")
PY
echo "serve_check: ok"
