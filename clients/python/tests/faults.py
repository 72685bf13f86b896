"""A loopback HTTP proxy in front of the real server that injects one scripted fault per
request: forward, forward but lose the answer (the connection closes before the client
reads it), or answer a problem itself without forwarding."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import List, Optional, Tuple


class FaultProxy:
    def __init__(self, upstream: str, script: List[Tuple]):
        host, port = upstream.replace("http://", "").split(":")
        self.upstream = (host, int(port))
        self.script = list(script)
        self.seen: List[Tuple[str, str, bytes]] = []
        self.forwarded = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket):
        with conn:
            f = conn.makefile("rb")
            line = f.readline().decode()
            if not line:
                return
            method, path, _ = line.split(" ", 2)
            headers = {}
            while True:
                h = f.readline().decode()
                if h in ("\r\n", "\n", ""):
                    break
                name, value = h.split(":", 1)
                headers[name.strip().lower()] = value.strip()
            body = f.read(int(headers.get("content-length", "0")))
            self.seen.append((method, path, body))
            action = self.script.pop(0) if self.script else ("forward",)
            if action[0] == "answer":
                _, status, problem, retry_after = action
                self._reply(conn, status, json.dumps(problem).encode(), retry_after)
                return
            up = http.client.HTTPConnection(*self.upstream, timeout=60)
            forward = {k: v for k, v in headers.items() if k not in ("host", "connection")}
            up.request(method, path, body=body, headers=forward)
            resp = up.getresponse()
            data = resp.read()
            up.close()
            self.forwarded += 1
            if action[0] == "lose":
                # The server acted; the client never hears of it.
                conn.shutdown(socket.SHUT_RDWR)
                return
            self._reply(conn, resp.status, data, None, resp.getheader("content-type"))

    @staticmethod
    def _reply(conn, status: int, body: bytes, retry_after: Optional[str], content_type: Optional[str] = None):
        head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close",
                f"Content-Type: {content_type or 'application/problem+json'}"]
        if retry_after is not None:
            head.append(f"Retry-After: {retry_after}")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


def problem(status: int, code: str) -> dict:
    return {"type": f"urn:episodic:problem:{code}", "title": code, "status": status, "code": code,
            "detail": f"injected {code}", "requestId": f"injected-{code}"}
