"""Fixtures: the real ``episodic`` binary on loopback, with a fresh data dir and keys.

``EPISODIC_BIN`` names the binary (``cargo test`` sets it to the one it built);
``EPISODIC_MODEL_DIR`` the model files (default: the repository's ``models/``, filled by
``bash models/fetch.sh``). Nothing is skipped: a missing binary or model fails the run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Server:
    base_url: str
    #: every tenant role, reads every privacy class (erasure needs it)
    key: str
    #: memory_reviewer and reader: decides reviews of what ``key`` writes
    reviewer_key: str
    #: reader only, limited to no actor: for missing-role errors
    reader_key: str
    data_dir: Path


def _binary() -> str:
    path = os.environ.get("EPISODIC_BIN")
    if not path:
        pytest.fail(
            "EPISODIC_BIN is not set: point it at the episodic binary "
            "(e.g. target/debug/episodic; cargo test --test it clients_python sets it)",
            pytrace=False,
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"EPISODIC_BIN={path} is not an executable file", pytrace=False)
    return path


def _model_dir() -> str:
    path = Path(os.environ.get("EPISODIC_MODEL_DIR") or REPO / "models")
    if not (path / "manifest.json").is_file() or not (path / "files").is_dir():
        pytest.fail(
            f"no model files in {path}: run bash models/fetch.sh or set EPISODIC_MODEL_DIR",
            pytrace=False,
        )
    return str(path)


def _key(binary: str, data_dir: Path, roles: str, *extra: str) -> str:
    out = subprocess.run(
        [binary, "keys", "create", "--data-dir", str(data_dir), "--tenant", "acme", "--roles", roles, *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        pytest.fail(f"episodic keys create failed: {out.stderr}", pytrace=False)
    return out.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    binary = _binary()
    models = _model_dir()
    data_dir = Path(tempfile.mkdtemp(prefix="episodic-py-"))
    key = _key(binary, data_dir, "writer,reader,operator,memory_reviewer", "--max-privacy-class", "sensitive")
    reviewer = _key(binary, data_dir, "memory_reviewer,reader")
    reader = _key(binary, data_dir, "reader")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "EPISODIC_ADMIN_KEY"}
    env.update(
        EPISODIC_DATA_DIR=str(data_dir),
        EPISODIC_LISTEN=f"127.0.0.1:{port}",
        EPISODIC_MODEL_DIR=models,
    )
    log = open(data_dir.parent / f"{data_dir.name}.log", "wb")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            log.close()
            pytest.fail(
                f"episodic serve exited ({proc.returncode}):\n{Path(log.name).read_text()[-4000:]}",
                pytrace=False,
            )
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("episodic serve was not ready within 120 s", pytrace=False)
        time.sleep(0.1)
    try:
        yield Server(base, key, reviewer, reader, data_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)
        os.unlink(log.name)


@pytest.fixture()
def client(server):
    from episodic_client import EpisodicClient

    with EpisodicClient(server.base_url, server.key) as c:
        yield c
