//! The HTTP edge of the real `episodic serve` binary, probed over raw sockets: slow and idle
//! clients are cut off, a stalled body gets 408, connections beyond the cap get 503 at once,
//! failed keys are limited per address, client request ids are sanitized before they are
//! echoed or logged, every error is problem+json, TLS terminates with rustls, the cap fits
//! the open-file limit, shutdown lets an in-flight request finish, a fresh start logs
//! plainly and quietly, and `EPISODIC_CORS_ORIGINS` lets a browser origin in.
//!
//! Time bounds are generous on purpose (a 1 s timeout is asserted as "closed within 15 s"):
//! the tests check that a connection is cut, not how fast.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::model_dir;
use crate::server_binary::free_port;

/// A long, random-looking admin key.
const ADMIN_KEY: &str = "edge-7c1f9a3e5b2d8046f1a9c3e7b5d2f80a4c6e1b9d";
/// How long any single wait may take before the test fails.
const GENEROUS: Duration = Duration::from_secs(15);

/// A running server with its stderr collected.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `episodic serve` with `env` on top of the test defaults and waits for ready.
    fn start(env: &[(&str, &str)]) -> Server {
        Server::start_with(env, None)
    }

    /// As [`Server::start`], optionally through a shell `ulimit -n <n>` first; does not wait.
    fn spawn(env: &[(&str, &str)], nofile: Option<u32>) -> Server {
        let dir = tempfile::tempdir().expect("tmp");
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let bin = env!("CARGO_BIN_EXE_episodic");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" serve"), bin]);
                c
            }
            None => {
                let mut c = Command::new(bin);
                c.arg("serve");
                c
            }
        };
        cmd.env("EPISODIC_DATA_DIR", dir.path())
            .env("EPISODIC_LISTEN", addr.to_string())
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env("EPISODIC_ADMIN_KEY", ADMIN_KEY)
            .env("NO_COLOR", "1")
            .env_remove("EPISODIC_CONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn episodic");
        let mut pipe = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                sink.lock().expect("stderr lock").push_str(&text);
            }
        });
        Server {
            child: Some(child),
            addr,
            stderr,
            reader: Some(reader),
            _dir: dir,
        }
    }

    fn start_with(env: &[(&str, &str)], nofile: Option<u32>) -> Server {
        let server = Server::spawn(env, nofile);
        server.wait_ready();
        server
    }

    /// Waits for `/readyz` over a connection that is closed afterwards.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                let req = "GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
                if s.write_all(req.as_bytes()).is_ok() {
                    if let Some(resp) = read_response(&mut s) {
                        if resp.status == 200 {
                            return;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("server not ready in time:\n{}", self.stderr());
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// Sends SIGTERM.
    fn signal_term(&self) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
    }

    /// The exit status (waiting at most 30 s) and the whole stderr.
    fn wait(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not exit in time:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.stderr())
    }

    /// SIGTERM, then [`Server::wait`].
    fn stop(self) -> (ExitStatus, String) {
        self.signal_term();
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }

    /// Asserts a problem+json body with `code` and `status`, whose `requestId` is the
    /// response's `X-Request-ID`; returns the body.
    fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        let body = self.json();
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(
            body["requestId"].as_str(),
            self.header("x-request-id"),
            "{body}"
        );
        body
    }
}

/// Reads one response (head, then a `Content-Length` body) within [`GENEROUS`]; `None` if
/// the connection closes or stalls first.
fn read_response(stream: &mut TcpStream) -> Option<Response> {
    stream.set_read_timeout(Some(GENEROUS)).ok()?;
    parse_response(stream)
}

/// Reads one response from any byte stream (the caller bounds the wait).
fn parse_response(stream: &mut impl Read) -> Option<Response> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some(Response {
        status,
        headers,
        body,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends `request` on a new connection and reads one response.
fn exchange(addr: SocketAddr, request: &str) -> Response {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(request.as_bytes()).expect("send");
    read_response(&mut s).unwrap_or_else(|| panic!("no response to {request:?}"))
}

/// Whether the server has closed `stream`: reads until EOF or a reset within [`GENEROUS`].
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let deadline = Instant::now() + GENEROUS;
    let mut chunk = [0u8; 1024];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    while Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// The `/metrics` text.
fn metrics(addr: SocketAddr) -> String {
    let resp = exchange(
        addr,
        &format!(
            "GET /metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\
             Connection: close\r\n\r\n"
        ),
    );
    String::from_utf8_lossy(&resp.body).into_owned()
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

#[test]
fn slow_stalled_and_idle_clients_are_cut_off() {
    let server = Server::start(&[
        ("EPISODIC_HEADER_TIMEOUT_MS", "1000"),
        ("EPISODIC_BODY_TIMEOUT_MS", "1000"),
        ("EPISODIC_IDLE_TIMEOUT_MS", "2000"),
        ("EPISODIC_WRITE_TIMEOUT_MS", "500"),
    ]);

    // A head trickled one byte every 200 ms is cut off, though bytes keep coming.
    let mut trickle = TcpStream::connect(server.addr).expect("connect");
    trickle
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let head = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let started = Instant::now();
    let mut cut = false;
    let mut chunk = [0u8; 1024];
    for byte in head {
        if trickle.write_all(&[*byte]).is_err() {
            cut = true;
            break;
        }
        match trickle.read(&mut chunk) {
            Ok(0) => {
                cut = true;
                break;
            }
            Ok(n) => panic!(
                "a trickled head got an answer: {:?}",
                String::from_utf8_lossy(&chunk[..n])
            ),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    assert!(
        cut,
        "a head trickled for {:?} was never cut off",
        started.elapsed()
    );
    assert!(started.elapsed() < GENEROUS);

    // A body that stalls gets a 408 problem, then the connection closes.
    let mut stalled = TcpStream::connect(server.addr).expect("connect");
    let partial = format!(
        "POST /v1/admin/keys HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"tenantId\":"
    );
    stalled.write_all(partial.as_bytes()).expect("send");
    let resp = read_response(&mut stalled).expect("an answer to a stalled body");
    resp.problem(408, "request_timeout");
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(closed_by_server(&mut stalled), "closed after the 408");

    // An idle kept-alive connection is closed after its response.
    let mut idle = TcpStream::connect(server.addr).expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    let resp = read_response(&mut idle).expect("response");
    assert_eq!(resp.status, 200);
    assert_ne!(resp.header("connection"), Some("close"), "kept alive");
    assert!(closed_by_server(&mut idle), "an idle connection stays open");

    // A connection that never sends anything is closed too.
    let mut silent = TcpStream::connect(server.addr).expect("connect");
    assert!(
        closed_by_server(&mut silent),
        "a silent connection stays open"
    );

    // A client that asks for a lot and reads none of it is cut off once the server's
    // writes stall: 2,000 pipelined requests for the OpenAPI document (far more than the
    // loopback socket buffers hold), nothing read until the server reports the cut.
    let mut greedy = TcpStream::connect(server.addr).expect("connect");
    let requests = "GET /openapi.json HTTP/1.1\r\nHost: t\r\n\r\n".repeat(2000);
    greedy.write_all(requests.as_bytes()).expect("send");
    let deadline = Instant::now() + GENEROUS;
    while !metrics(server.addr).contains("reason=\"write_timeout\"") {
        assert!(
            Instant::now() < deadline,
            "a stalled write was never cut off"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut answered = 0;
    while read_response(&mut greedy).is_some() {
        answered += 1;
    }
    assert!(answered < 2000, "all {answered} responses arrived");

    let (status, _) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
}

#[test]
fn request_ids_are_sanitized_and_every_error_is_problem_json() {
    let server = Server::start(&[]);
    let addr = server.addr;
    let get = |path: &str, extra: &str| {
        exchange(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n"),
        )
    };

    // A safe client id is kept, echoed and put in problem bodies.
    let kept = get("/v1/timeline", "X-Request-ID: client-id.ok_123:4\r\n");
    kept.problem(401, "unauthenticated");
    assert_eq!(kept.header("x-request-id"), Some("client-id.ok_123:4"));

    // An over-long id and one that would forge log fields are replaced by a UUID.
    let long = format!("longid{}", "q".repeat(8000));
    let forged = "forged status=200 evil=1";
    for id in [long.as_str(), forged] {
        let resp = get("/v1/timeline", &format!("X-Request-ID: {id}\r\n"));
        let body = resp.problem(401, "unauthenticated");
        let echoed = resp.header("x-request-id").expect("an id");
        assert_ne!(echoed, id);
        assert!(is_uuid(echoed), "{echoed}");
        assert_eq!(body["requestId"], echoed);
    }

    // A path that is not UTF-8 once percent-decoded.
    let admin = format!("Authorization: Bearer {ADMIN_KEY}\r\n");
    get("/v1/events/%FF", &admin).problem(400, "bad_request");

    // /mcp's own refusals: a wrong Accept (406) and a wrong content type (415).
    let mcp = |accept: &str, content_type: &str| {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        exchange(
            addr,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: t\r\n{admin}Accept: {accept}\r\n\
                 Content-Type: {content_type}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    mcp("text/plain", "application/json").problem(406, "not_acceptable");
    mcp("application/json, text/event-stream", "text/plain").problem(415, "unsupported_media_type");
    let ok = mcp("application/json, text/event-stream", "application/json");
    assert_eq!(ok.status, 200, "{ok:?}");

    let (status, stderr) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
    assert!(
        stderr.contains("request_id=client-id.ok_123:4"),
        "safe ids are logged:\n{stderr}"
    );
    assert!(
        !stderr.contains("qqqqqqqqqqqqqqqq"),
        "the long id was logged"
    );
    assert!(!stderr.contains("forged"), "the forging id was logged");
}

#[test]
fn connections_beyond_the_cap_get_503_at_once() {
    let server = Server::start(&[("EPISODIC_MAX_CONNECTIONS", "2")]);
    let addr = server.addr;
    let healthz = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    // Two kept-alive connections that have been served hold both slots.
    let deadline = Instant::now() + GENEROUS;
    let held = loop {
        let held: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.write_all(healthz.as_bytes()).expect("send");
                s
            })
            .collect();
        let served: Vec<bool> = held
            .iter()
            .map(|s| {
                let mut s = s.try_clone().expect("clone");
                read_response(&mut s).is_some_and(|r| r.status == 200)
            })
            .collect();
        // Both are read before deciding, so neither answer is left behind.
        if served.iter().all(|ok| *ok) {
            break held;
        }
        assert!(Instant::now() < deadline, "the slots never came free");
        drop(held);
        std::thread::sleep(Duration::from_millis(200));
    };

    let mut third = TcpStream::connect(addr).expect("connect");
    third.write_all(healthz.as_bytes()).expect("send");
    let resp = read_response(&mut third).expect("an answer beyond the cap");
    resp.problem(503, "too_many_connections");
    let retry: u64 = resp
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!(retry >= 1);
    assert!(closed_by_server(&mut third));

    for s in &held {
        let _ = s.shutdown(Shutdown::Both);
    }
    drop(held);
    let deadline = Instant::now() + GENEROUS;
    loop {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(healthz.as_bytes()).expect("send");
        if read_response(&mut s).is_some_and(|r| r.status == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "slots never came back");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Shutdown lets an in-flight request finish: its body arrives after SIGTERM.
    let body = r#"{"tenantId":"acme","roles":["reader"]}"#;
    let (first, rest) = body.split_at(10);
    let mut inflight = TcpStream::connect(addr).expect("connect");
    inflight
        .write_all(
            format!(
                "POST /v1/admin/keys HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
                body.len()
            )
            .as_bytes(),
        )
        .expect("send");
    std::thread::sleep(Duration::from_millis(300));
    server.signal_term();
    let deadline = Instant::now() + GENEROUS;
    while TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    }
    inflight.write_all(rest.as_bytes()).expect("send the rest");
    let resp = read_response(&mut inflight).expect("the in-flight request is answered");
    assert_eq!(resp.status, 201, "{resp:?}");
    assert_eq!(resp.header("connection"), Some("close"));
    let (status, _) = server.wait();
    assert!(status.success(), "graceful exit: {status}");
}

#[test]
fn failed_keys_are_limited_per_address() {
    let server = Server::start(&[
        ("EPISODIC_AUTH_FAILURES_PER_MINUTE", "1"),
        ("EPISODIC_AUTH_FAILURE_BURST", "3"),
    ]);
    let base = format!("http://{}", server.addr);
    let client = |source: &str| {
        reqwest::blocking::Client::builder()
            .local_address(source.parse::<IpAddr>().expect("ip"))
            .timeout(GENEROUS)
            .build()
            .expect("client")
    };
    let here = client("127.0.0.1");
    let keys = |c: &reqwest::blocking::Client, key: &str| {
        c.get(format!("{base}/v1/admin/keys"))
            .bearer_auth(key)
            .send()
            .expect("request")
    };
    for _ in 0..3 {
        assert_eq!(keys(&here, "wrong-key").status().as_u16(), 401);
    }
    let limited = keys(&here, "wrong-key");
    assert_eq!(limited.status().as_u16(), 429);
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        limited.headers()["content-type"],
        "application/problem+json"
    );
    let body: Value = limited.json().expect("json");
    assert_eq!(body["code"], "too_many_requests");
    assert_eq!(
        keys(&here, ADMIN_KEY).status().as_u16(),
        429,
        "while exhausted, the key is not checked"
    );
    // No key at all is a plain 401, not counted and not limited.
    let anonymous = here
        .get(format!("{base}/v1/admin/keys"))
        .send()
        .expect("request");
    assert_eq!(anonymous.status().as_u16(), 401);

    // Another address is unaffected (when a second loopback address can be bound).
    let other = client("127.0.0.2");
    match other
        .get(format!("{base}/v1/admin/keys"))
        .bearer_auth(ADMIN_KEY)
        .send()
    {
        Ok(resp) => assert_eq!(resp.status().as_u16(), 200),
        Err(e) => eprintln!("127.0.0.2 is not usable here ({e}); skipping that part"),
    }
    let (status, _) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
}

/// A self-signed certificate for 127.0.0.1 and localhost, written as PEM files.
fn self_signed(dir: &Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".into()])
            .expect("certificate");
    let cert_pem = certified.cert.pem();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, &cert_pem).expect("write cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write key");
    (cert_pem, cert, key)
}

/// One HTTPS exchange with a rustls client that trusts only `cert_pem`; `None` if the
/// handshake or the exchange fails.
fn https_exchange(addr: SocketAddr, cert_pem: &str, request: &str) -> Option<Response> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem"))
        .expect("root");
    // The server's provider; see `api::listener`.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let tcp = TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(GENEROUS)).ok()?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(request.as_bytes()).ok()?;
    parse_response(&mut tls)
}

#[test]
fn tls_terminates_with_the_configured_certificate() {
    let certs = tempfile::tempdir().expect("tmp");
    let (cert_pem, cert, key) = self_signed(certs.path());
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
    let server = Server::spawn(
        &[
            ("EPISODIC_TLS_CERT", cert.as_ref()),
            ("EPISODIC_TLS_KEY", key.as_ref()),
            ("EPISODIC_TLS_HANDSHAKE_TIMEOUT_MS", "1000"),
        ],
        None,
    );
    let https = |request: &str| https_exchange(server.addr, &cert_pem, request);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = https("GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        if ready.is_some_and(|r| r.status == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "not ready:\n{}", server.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let keys = https(&format!(
        "GET /v1/admin/keys HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\
         Connection: close\r\n\r\n"
    ))
    .expect("https exchange");
    assert_eq!(keys.status, 200, "{keys:?}");
    // The server presents the configured certificate: a client trusting another one fails.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
        .expect("certificate")
        .cert
        .pem();
    let healthz = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert!(https_exchange(server.addr, &other, healthz).is_none());

    // Plain HTTP on the TLS port is not served.
    let mut plain = TcpStream::connect(server.addr).expect("connect");
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("send");
    plain.set_read_timeout(Some(GENEROUS)).expect("timeout");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("HTTP/1.1 200"),
        "plain HTTP was served on the TLS port"
    );

    // A client that never starts its handshake is cut off.
    let mut stuck = TcpStream::connect(server.addr).expect("connect");
    assert!(closed_by_server(&mut stuck), "a stuck handshake stays open");

    let (status, _) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
}

/// A server on a brand-new data directory, its readiness polled while it loads and one MCP
/// call served, logs plain text over a pipe (no colour codes, though `NO_COLOR` is not set)
/// with no warning or error, no removal of a snapshot that never was, and nothing from rmcp
/// or hnsw_rs at the default filter.
#[test]
fn a_fresh_server_logs_plain_text_without_warnings() {
    let server = Server::start(&[("NO_COLOR", "")]);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let listed = exchange(
        server.addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!(listed.status, 200, "{listed:?}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
    assert!(
        stderr.contains("status=503"),
        "readiness was polled while the engine loaded:\n{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a piped log:\n{stderr}"
    );
    assert!(
        !stderr.contains("removed the hnsw snapshot"),
        "a fresh directory held no snapshot:\n{stderr}"
    );
    for line in stderr.lines() {
        assert!(
            !line.contains("WARN") && !line.contains("ERROR"),
            "a fresh start warns:\n{stderr}"
        );
        assert!(
            !line.contains("rmcp") && !line.contains("hnsw_rs"),
            "a dependency's chatter:\n{stderr}"
        );
    }
}

/// `EPISODIC_CORS_ORIGINS` reaches the router: a preflight from an allowed origin is
/// answered before authentication (also on `/mcp`), and answers carry the origin.
#[test]
fn cors_origins_from_the_environment_let_a_browser_in() {
    let origin = "https://app.example.com";
    let server = Server::start(&[("EPISODIC_CORS_ORIGINS", origin)]);
    for path in ["/v1/recall", "/mcp"] {
        let preflight = exchange(
            server.addr,
            &format!(
                "OPTIONS {path} HTTP/1.1\r\nHost: t\r\nOrigin: {origin}\r\n\
                 Access-Control-Request-Method: POST\r\n\
                 Access-Control-Request-Headers: authorization, content-type\r\n\
                 Connection: close\r\n\r\n"
            ),
        );
        assert_eq!(preflight.status, 200, "{path}: {preflight:?}");
        assert_eq!(
            preflight.header("access-control-allow-origin"),
            Some(origin),
            "{path}"
        );
    }
    let refused = exchange(
        server.addr,
        &format!(
            "GET /v1/timeline HTTP/1.1\r\nHost: t\r\nOrigin: {origin}\r\nConnection: close\r\n\r\n"
        ),
    );
    refused.problem(401, "unauthenticated");
    assert_eq!(refused.header("access-control-allow-origin"), Some(origin));
    let (status, _) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
}

#[test]
fn the_connection_cap_fits_the_open_file_limit() {
    // 512 descriptors: 192 are kept back, so the default cap of 1024 comes down to 320.
    let server = Server::start_with(&[], Some(512));
    let healthz = exchange(
        server.addr,
        "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(healthz.status, 200);
    let (status, stderr) = server.stop();
    assert!(status.success(), "graceful exit: {status}");
    assert!(
        stderr.contains("--max-connections lowered") && stderr.contains("lowered_to=320"),
        "{stderr}"
    );

    // With too few descriptors for any connection, start-up fails and says why.
    let (status, stderr) = Server::spawn(&[], Some(150)).wait();
    assert!(!status.success());
    assert!(stderr.contains("open-file limit (150)"), "{stderr}");
}
