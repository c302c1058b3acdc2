#!/usr/bin/env bash
# A headless Chromium for the report's browser test (tests/campaign/test_report_html.py).
# In this order, the first that starts:
#   1. a Chromium already on PATH (chromium, chromium-browser);
#   2. as root with apt-get (Debian, Ubuntu, a CI container): the distribution's
#      `chromium` package (apt-get update, then install);
#   3. the npm package @sparticuz/chromium: a self-contained Linux x64 build, shipped
#      brotli-compressed (the browser, its SwiftShader GL libraries, NSS libraries, fonts),
#      unpacked into DEST.
#
#   tools/install_browser.sh [DEST]      # default: .browser/ at the repository root
#
# Idempotent: an install that starts is left as it is. 3 needs node and npm (the npm
# registry) and writes nothing outside DEST (npm's own cache aside). Prints the browser's
# path. The test finds it at $ONNXFUZZ_CHROMIUM, DEST/chromium/chromium, or on PATH.
set -euo pipefail

VERSION=153.0.0
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:-$ROOT/.browser}"
BIN="$DEST/chromium/chromium"

starts() {  # the browser ($1, default: DEST's) prints its version: it and its libraries load
    LD_LIBRARY_PATH="$DEST/chromium/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout 60 "${1:-$BIN}" --headless=new --no-sandbox --version >/dev/null 2>&1
}

on_path() {  # a Chromium on PATH that starts, printed; status 1 if none
    local name path
    for name in chromium chromium-browser; do
        path="$(command -v "$name" 2>/dev/null)" || continue
        if starts "$path"; then
            echo "$path"
            return 0
        fi
    done
    return 1
}

if [ -x "$BIN" ] && [ "$(cat "$DEST/VERSION" 2>/dev/null)" = "$VERSION" ] && starts; then
    echo "$BIN"
    exit 0
fi
on_path && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install_browser: installing the distribution's chromium with apt-get" >&2
    if apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium >&2 && on_path; then
        exit 0
    fi
    echo "install_browser: apt-get gave no chromium that starts; trying npm" >&2
fi
for tool in node npm tar; do
    command -v "$tool" >/dev/null || { echo "install_browser: needs $tool" >&2; exit 2; }
done

mkdir -p "$DEST"
WORK="$(mktemp -d "$DEST/.install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
npm install --prefix "$WORK/npm" --no-save --no-audit --no-fund --loglevel=error \
    "@sparticuz/chromium@$VERSION" >&2
PKG="$WORK/npm/node_modules/@sparticuz/chromium/bin"

# Layout: the browser beside its GL libraries (libEGL, libGLESv2, SwiftShader's Vulkan
# ICD: Chromium looks for them next to its executable; without them the GPU process
# fails and nothing is ever painted), NSS/NSPR/expat in lib/ (for hosts without them),
# and the fonts with a fontconfig file that also reads the host's fonts.
OUT="$WORK/out"
mkdir -p "$OUT/lib" "$OUT/fonts"
node -e '
const fs = require("fs"), zlib = require("zlib"), path = require("path");
const [src, out] = process.argv.slice(1);
for (const name of ["chromium", "swiftshader.tar", "al2023.tar", "fonts.tar"]) {
  fs.writeFileSync(path.join(out, name), zlib.brotliDecompressSync(fs.readFileSync(path.join(src, name + ".br"))));
}' "$PKG" "$WORK"
mv "$WORK/chromium" "$OUT/chromium"
mkdir -p "$WORK/al2023"
tar -xf "$WORK/swiftshader.tar" -C "$OUT"
tar -xf "$WORK/al2023.tar" -C "$WORK/al2023"
cp -a "$WORK/al2023/lib/." "$OUT/lib/"
tar -xf "$WORK/fonts.tar" -C "$OUT/fonts"
chmod 755 "$OUT/chromium"
cat >"$OUT/fonts.conf" <<EOF
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>$DEST/chromium/fonts</dir>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir>$DEST/fontconfig-cache</cachedir>
</fontconfig>
EOF

rm -rf "$DEST/chromium"
mv "$OUT" "$DEST/chromium"
echo "$VERSION" >"$DEST/VERSION"
if ! starts; then
    echo "install_browser: $BIN is installed but does not start here" >&2
    exit 1
fi
echo "$BIN"
