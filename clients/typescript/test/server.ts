/**
 * Test fixtures: the real `episodic` binary (`EPISODIC_BIN`) on loopback with a fresh data
 * dir, keys made offline by `episodic keys create`, and a fault-injecting proxy. The model
 * files come from `EPISODIC_MODEL_DIR`, else the repository's `models/`.
 */

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, existsSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

export interface Server {
  baseUrl: string;
  key: string;
  reviewerKey: string;
  readerKey: string;
  stop(): Promise<void>;
}

function binary(): string {
  const path = process.env["EPISODIC_BIN"];
  if (!path) {
    throw new Error("EPISODIC_BIN is not set: point it at the episodic binary (cargo test --test it clients_typescript sets it)");
  }
  accessSync(path, constants.X_OK);
  return path;
}

function modelDir(): string {
  const dir = process.env["EPISODIC_MODEL_DIR"] || join(REPO, "models");
  if (!existsSync(join(dir, "manifest.json")) || !existsSync(join(dir, "files"))) {
    throw new Error(`no model files in ${dir}: run bash models/fetch.sh or set EPISODIC_MODEL_DIR`);
  }
  return dir;
}

export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => ok(port));
    });
  });
}

export async function startServer(): Promise<Server> {
  const bin = binary();
  const models = modelDir();
  const dataDir = mkdtempSync(join(tmpdir(), "episodic-ts-"));
  const key = (roles: string, ...extra: string[]) =>
    execFileSync(bin, ["keys", "create", "--data-dir", dataDir, "--tenant", "acme", "--roles", roles, ...extra], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  const writer = key("writer,reader,operator,memory_reviewer", "--max-privacy-class", "sensitive");
  const reviewer = key("memory_reviewer,reader");
  const reader = key("reader");
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, EPISODIC_DATA_DIR: dataDir, EPISODIC_LISTEN: `127.0.0.1:${port}`, EPISODIC_MODEL_DIR: models };
  delete env["EPISODIC_ADMIN_KEY"];
  const child: ChildProcess = spawn(bin, ["serve"], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000);
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`episodic serve exited (${child.exitCode}):\n${log}`);
    try {
      if ((await fetch(`${baseUrl}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`episodic serve was not ready within 120 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    baseUrl,
    key: writer,
    reviewerKey: reviewer,
    readerKey: reader,
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type Fault = ["forward"] | ["lose"] | ["answer", number, string, string | null];

export function problem(status: number, code: string): string {
  return JSON.stringify({ type: `urn:episodic:problem:${code}`, title: code, status, code, detail: `injected ${code}`, requestId: `injected-${code}` });
}

/** A proxy that applies one scripted fault per request, then forwards. */
export class FaultProxy {
  readonly seen: { method: string; path: string; body: string }[] = [];
  forwarded = 0;
  url = "";
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly upstream: string, private readonly script: Fault[]) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.on("connection", (s: Socket) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((ok) => this.server.listen(0, "127.0.0.1", ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((ok) => this.server.close(ok));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString();
    this.seen.push({ method: req.method!, path: req.url!, body });
    const action = this.script.shift() ?? ["forward"];
    if (action[0] === "answer") {
      const headers: Record<string, string> = { "content-type": "application/problem+json", connection: "close" };
      if (action[3] !== null) headers["retry-after"] = action[3];
      res.writeHead(action[1], headers).end(action[2]);
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers[k] = v;
    }
    const up = await fetch(this.upstream + req.url, { method: req.method, headers, body: body || undefined });
    const text = await up.text();
    this.forwarded++;
    if (action[0] === "lose") {
      // The server acted; the client never hears of it.
      req.socket.destroy();
      return;
    }
    res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json", "x-request-id": up.headers.get("x-request-id") ?? "", connection: "close" }).end(text);
  }
}
