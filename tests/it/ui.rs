//! The operator page at `/ui`: its assets and headers in-process, then the real `episodic
//! serve` binary driven by Debian's headless chromium over WebDriver (chromedriver): log in,
//! timeline, recall with a score breakdown, event history, approving a pending review (then
//! checked through the API), the audit trail, and a screenshot.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common::{event, model_dir, with, App, BREAKDOWN_PARTS};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(60);

async fn get_raw(app: &App, path: &str) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    let req = Request::builder()
        .uri(path)
        .body(Body::empty())
        .expect("request");
    let resp = app.router.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, headers, bytes.to_vec())
}

#[tokio::test]
async fn ui_assets_have_their_types_a_strict_csp_and_no_inline_script() {
    let app = App::new();
    let cases = [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/index.html", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ];
    for (path, ct) in cases {
        let (status, headers, body) = get_raw(&app, path).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["content-type"], ct, "{path}");
        let csp = headers["content-security-policy"].to_str().expect("csp");
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(!body.is_empty());
    }
    let (_, _, html) = get_raw(&app, "/ui").await;
    let html = String::from_utf8(html).expect("utf-8");
    for (i, _) in html.match_indices("<script") {
        let tag = &html[i..i + html[i..].find('>').expect("tag end")];
        assert!(tag.contains(" src=\"/ui/"), "inline script: {tag}");
    }
    assert!(!html.contains("<style"), "inline style element");
    assert!(!html.contains(" style="), "inline style attribute");
    assert!(
        !regex::Regex::new(r"\son[a-z]+=")
            .expect("re")
            .is_match(&html),
        "inline event handler"
    );
    assert!(!html.contains("http://") && !html.contains("https://"));
    let (_, _, js) = get_raw(&app, "/ui/app.js").await;
    let js = String::from_utf8(js).expect("utf-8");
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "eval(",
        "localStorage",
    ] {
        assert!(!js.contains(banned), "app.js uses {banned}");
    }
    assert!(js.contains("sessionStorage"));

    let (status, headers, body) = get_raw(&app, "/ui/../Cargo.toml").await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/problem+json");
    let problem: Value = serde_json::from_slice(&body).expect("problem json");
    assert_eq!(problem["code"], "route_not_found");
    let (status, headers, _) = get_raw(&app, "/ui/secrets.json").await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/problem+json");
    // The page needs no key; the API behind it still does.
    let (status, _, _) = get_raw(&app, "/v1/timeline").await;
    assert_eq!(status, 401);
}

// ---------- real server ----------

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A child process killed (by its own pid) when dropped, also on a failed assertion.
struct Proc(Option<Child>);

impl Proc {
    fn stop_gracefully(mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "graceful exit: {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        panic!("server did not stop on SIGTERM");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_http_ok(client: &reqwest::blocking::Client, url: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(url).send() {
            if r.status().is_success() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} not ready in time at {url}");
}

struct Server {
    base: String,
    admin: String,
    client: reqwest::blocking::Client,
    proc: Proc,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = free_port();
        let log = File::create(dir.join("server.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_episodic"))
            .arg("serve")
            .env("EPISODIC_DATA_DIR", dir.join("data"))
            .env("EPISODIC_LISTEN", format!("127.0.0.1:{port}"))
            .env("EPISODIC_MODEL_DIR", model_dir())
            .env_remove("EPISODIC_ADMIN_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn episodic");
        let proc = Proc(Some(child));
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        wait_http_ok(&client, &format!("{base}/readyz"), "episodic");
        let admin = std::fs::read_to_string(dir.join("data").join("admin.key"))
            .expect("admin.key written by serve")
            .trim()
            .to_string();
        Server {
            base,
            admin,
            client,
            proc,
        }
    }

    fn call(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn key(&self, roles: &[&str]) -> String {
        let (status, body) = self.call(
            "POST",
            "/v1/admin/keys",
            &self.admin,
            Some(json!({"tenantId": "acme", "roles": roles})),
        );
        assert_eq!(status, 201, "{body}");
        body["key"].as_str().expect("key").to_string()
    }

    fn write(&self, key: &str, ev: Value) -> (u16, String) {
        let (status, body) = self.call("POST", "/v1/events?refresh=wait_for", key, Some(ev));
        assert!(status == 201 || status == 202, "{status} {body}");
        (status, body["eventId"].as_str().expect("id").to_string())
    }
}

// ---------- a minimal W3C WebDriver client over reqwest ----------

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Browser {
    http: reqwest::blocking::Client,
    url: String,
    _profile: tempfile::TempDir,
    driver: Proc,
}

impl Browser {
    fn start() -> Browser {
        for (path, what) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver")] {
            assert!(
                Path::new(path).exists(),
                "{what} is missing at {path}: the operator page test needs Debian's headless \
                 chromium; install it with `apt-get install -y chromium chromium-driver` \
                 (.ci/run does this)"
            );
        }
        let port = free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let driver = Proc(Some(child));
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        let base = format!("http://127.0.0.1:{port}");
        wait_http_ok(&http, &format!("{base}/status"), "chromedriver");
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1366,1400",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .expect("new session")
            .json()
            .expect("session json");
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromium did not start: {resp}"))
            .to_string();
        Browser {
            http,
            url: format!("{base}/session/{session}"),
            _profile: profile,
            driver,
        }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.url);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let resp: Value = req.send().expect("webdriver").json().expect("json");
        if resp["value"].get("error").is_some() {
            panic!("webdriver {method} {path}: {}", resp["value"]);
        }
        resp["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    fn js(&self, script: &str, args: &Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Polls `script` (a function body returning a value) until it returns something truthy.
    fn wait(&self, what: &str, script: &str, args: &Value) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let v = self.js(script, args);
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let body = self.js("return document.body.innerText", &json!([]));
                panic!("timed out waiting for {what}; page text:\n{body}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let resp: Value = self
                .http
                .post(format!("{}/element", self.url))
                .json(&json!({"using": "css selector", "value": css}))
                .send()
                .expect("find")
                .json()
                .expect("json");
            if let Some(id) = resp["value"][ELEMENT].as_str() {
                return id.to_string();
            }
            if Instant::now() > deadline {
                panic!("no element {css}: {}", resp["value"]);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn click(&self, css: &str) {
        let el = self.find(css);
        self.cmd("POST", &format!("/element/{el}/click"), None);
    }

    fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css);
        self.cmd("POST", &format!("/element/{el}/clear"), None);
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({ "text": text })),
        );
    }

    fn text(&self, css: &str) -> String {
        let el = self.find(css);
        self.cmd("GET", &format!("/element/{el}/text"), None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the detail panel shows `id` with at least `min` history entries, and
    /// returns their texts.
    fn history(&self, id: &str, min: usize) -> Vec<String> {
        self.wait(
            "the event history",
            "return document.getElementById('detail-id').textContent === arguments[0]
                && document.getElementById('detail-note').textContent !== 'loading…'
                && document.querySelectorAll('#detail-history li.h').length >= arguments[1]",
            &json!([id, min]),
        );
        self.js(
            "return [...document.querySelectorAll('#detail-history li.h')].map(h => h.textContent)",
            &json!([]),
        )
        .as_array()
        .expect("history")
        .iter()
        .map(|h| h.as_str().expect("text").to_string())
        .collect()
    }

    fn screenshot(&self, path: &Path) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("decode");
        std::fs::write(path, &png).expect("write screenshot");
        png
    }

    /// Browser console entries (CSP violations and script errors land here).
    fn console(&self) -> Vec<Value> {
        self.cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.url).send();
        let _ = self.driver.0.take().map(|mut c| {
            let _ = c.kill();
            c.wait()
        });
    }
}

fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "screenshot is not a PNG"
    );
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

fn screenshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

#[test]
fn ui_drives_the_real_server_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = Server::start(dir.path());
    let writer = server.key(&["writer", "reader"]);
    let approver = server.key(&["reader", "memory_reviewer", "operator"]);

    // Distinct resources: events on one subject (actor, type, resources) would make the
    // older ones stale, and stale events are left out of recall by default.
    let ev = |actor: &str, summary: &str, at: &str, project: &str, resource: &str| {
        let e = with(event(actor, summary, at), "projectId", json!(project));
        with(e, "resourceRefs", json!([resource]))
    };
    let (_, email) = server.write(
        &writer,
        ev(
            "customer-42",
            "The customer asked for renewal notices by email, not by phone",
            "2026-03-02T10:00:00Z",
            "billing",
            "renewal-notices",
        ),
    );
    let (_, invoice) = server.write(
        &writer,
        ev(
            "customer-42",
            "Invoices must be sent as PDF to the finance mailbox",
            "2026-04-11T15:30:00Z",
            "billing",
            "invoices",
        ),
    );
    let (_, tz) = server.write(
        &writer,
        ev(
            "customer-7",
            "Prefers meetings after 2pm <b>Berlin</b> time",
            "2026-05-20T08:15:00Z",
            "support",
            "meetings",
        ),
    );
    let (status, pending) = server.write(
        &writer,
        with(
            ev(
                "customer-42",
                "Vendor PDF says payment terms are net-30 <script>alert(1)</script>",
                "2026-05-28T12:00:00Z",
                "billing",
                "payment-terms",
            ),
            "sourceTrust",
            json!("untrusted_content"),
        ),
    );
    assert_eq!(status, 202, "untrusted content goes to review");

    let browser = Browser::start();
    let ui = format!("{}/ui", server.base);
    browser.goto(&ui);
    browser.find("#login-form");
    assert_eq!(
        browser.js("return document.title", &json!([])),
        "Episodic operator"
    );

    // A wrong key: the problem+json is shown (code, detail and request id), not logged in.
    browser.type_into("#api-key", "not-a-real-key");
    browser.click("#login-form button[type=submit]");
    browser.wait(
        "the login problem",
        "return !document.getElementById('login-problem').hidden",
        &json!([]),
    );
    let problem = browser.text("#login-problem");
    assert!(problem.contains("unauthenticated"), "{problem}");
    assert!(problem.contains("request id"), "{problem}");
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        Value::Null
    );

    // Log in: the timeline shows the three active events with both time axes.
    browser.type_into("#api-key", &approver);
    browser.click("#login-form button[type=submit]");
    browser.wait(
        "timeline rows",
        "return document.querySelectorAll('#timeline-rows tr[data-event-id]').length === 3",
        &json!([]),
    );
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        json!(approver)
    );
    let rows = browser.js(
        "return [...document.querySelectorAll('#timeline-rows tr[data-event-id]')]
            .map(r => [r.dataset.eventId, ...[...r.cells].map(c => c.textContent)])",
        &json!([]),
    );
    let rows = rows.as_array().expect("rows");
    let ids: Vec<&str> = rows.iter().map(|r| r[0].as_str().expect("id")).collect();
    assert_eq!(ids, vec![email.as_str(), invoice.as_str(), tz.as_str()]);
    let (_, got) = server.call("GET", &format!("/v1/events/{tz}"), &approver, None);
    assert_eq!(rows[2][1], got["occurredAt"]);
    assert_eq!(rows[2][2], got["recordedAt"]);
    assert_eq!(rows[2][3], "user_preference_stated");
    assert_eq!(rows[2][4], "customer-7");
    assert_eq!(rows[2][7], "Prefers meetings after 2pm <b>Berlin</b> time");
    assert_eq!(
        browser.js(
            "return document.querySelectorAll('#timeline-rows b').length",
            &json!([])
        ),
        0,
        "summaries are text, never markup"
    );
    // Scope filter: one actor.
    browser.type_into("#timeline-form input[name=actorId]", "customer-7");
    browser.click("#timeline-form button[type=submit]");
    browser.wait(
        "the filtered timeline",
        "return document.querySelectorAll('#timeline-rows tr[data-event-id]').length === 1",
        &json!([]),
    );
    browser.screenshot(&screenshot_dir().join("ui-timeline.png"));

    // Reviews: the pending event is listed and approved from the page.
    browser.click("#tab-reviews");
    let item = format!("li.review[data-event-id='{pending}']");
    browser.find(&item);
    let review_text = browser.text(&item);
    assert!(
        review_text.contains("<script>alert(1)</script>"),
        "{review_text}"
    );
    browser.type_into(&format!("{item} input.note"), "checked the vendor PDF");
    browser.click(&format!("{item} button.approve"));
    browser.wait(
        "the approval",
        "return document.querySelector(arguments[0] + ' .decided-msg')?.textContent",
        &json!([item]),
    );
    assert!(browser
        .text(&format!("{item} .decided-msg"))
        .contains("active"));
    let (status, got) = server.call("GET", &format!("/v1/events/{pending}"), &approver, None);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["status"], "active", "approved through the page");
    let (_, queue) = server.call("GET", "/v1/reviews", &approver, None);
    assert_eq!(queue["reviews"], json!([]));
    browser.click(&format!("{item} button.open-event"));
    let history = browser.history(&pending, 2);
    assert!(
        history[0].starts_with("write") && history[0].contains("policy decision: review"),
        "{history:?}"
    );
    assert!(
        history[1].starts_with("approve") && history[1].contains("with a note"),
        "{history:?}"
    );

    // Recall: each hit shows its score and the weighted components that sum to it.
    browser.click("#tab-recall");
    let query = "how does the customer want renewal reminders";
    browser.type_into("#recall-form input[name=query]", query);
    browser.click("#recall-form button[type=submit]");
    browser.wait(
        "recall hits",
        "return document.querySelectorAll('#recall-results li.hit').length >= 3",
        &json!([]),
    );
    let (status, api_recall) = server.call(
        "POST",
        "/v1/recall",
        &approver,
        Some(json!({"query": query, "scope": {}, "limit": 10})),
    );
    assert_eq!(status, 200);
    let page_hits = browser.js(
        "return [...document.querySelectorAll('#recall-results li.hit')].map(h => ({
            id: h.dataset.eventId,
            score: h.querySelector('.score').textContent,
            parts: [...h.querySelectorAll('table.breakdown tbody tr')].map(r => r.cells[1].textContent),
            segs: h.querySelectorAll('.bar .seg').length,
            why: h.querySelector('.why').textContent }))",
        &json!([]),
    );
    let page_hits = page_hits.as_array().expect("hits");
    let api_hits = api_recall["results"].as_array().expect("results");
    assert_eq!(page_hits.len(), api_hits.len());
    assert_eq!(
        page_hits[0]["id"],
        json!(email),
        "the email preference ranks first"
    );
    for (p, a) in page_hits.iter().zip(api_hits) {
        assert_eq!(p["id"], a["event"]["eventId"]);
        let f = |v: &Value| format!("{:.3}", v.as_f64().expect("number"));
        assert_eq!(p["score"], json!(format!("score {}", f(&a["score"]))));
        let b = &a["scoreBreakdown"];
        let expected: Vec<String> = BREAKDOWN_PARTS
            .iter()
            .map(|c| f(&b[*c]))
            .chain([f(&a["score"])])
            .collect();
        assert_eq!(p["parts"], json!(expected));
        assert_eq!(p["segs"], BREAKDOWN_PARTS.len());
        let why = p["why"].as_str().expect("why");
        assert!(
            why.contains(&format!("cosine similarity {}", f(&b["cosine"]))),
            "{why}"
        );
    }
    assert!(browser
        .text("#recall-stats")
        .contains("in-scope candidate(s)"));

    browser.js(
        "document.getElementById('detail').hidden = true; window.scrollTo(0, 0)",
        &json!([]),
    );
    let shot = browser.screenshot(&screenshot_dir().join("ui.png"));

    // History of the top hit: its write decision and the reads that returned it.
    browser.click(&format!(
        "#recall-results li.hit[data-event-id='{email}'] button.open-event"
    ));
    let history = browser.history(&email, 2);
    assert!(
        history[0].starts_with("write") && history[0].contains("policy decision: allow"),
        "{history:?}"
    );
    assert!(
        history.iter().any(|h| h.starts_with("recall")),
        "{history:?}"
    );
    assert!(browser
        .text("#detail-fields")
        .contains("renewal notices by email"));
    browser.screenshot(&screenshot_dir().join("ui-history.png"));

    // Audit trail: the approval is there, paginated.
    browser.click("#tab-audit");
    browser.type_into("#audit-form input[name=limit]", "3");
    browser.click("#audit-form button[type=submit]");
    browser.wait(
        "an audit page",
        "return document.querySelectorAll('#audit-rows tr.action-write').length === 3",
        &json!([]),
    );
    browser.click("#audit-next");
    browser.wait(
        "the next audit page",
        "return document.getElementById('audit-info').textContent.includes('after #')",
        &json!([]),
    );
    browser.js(
        "document.querySelector('#audit-form select[name=action]').value = 'approve'",
        &json!([]),
    );
    browser.click("#audit-form button[type=submit]");
    browser.wait(
        "the approve entry",
        "return document.querySelectorAll('#audit-rows tr.action-approve').length === 1",
        &json!([]),
    );
    assert!(browser.text("#audit-rows").contains(&pending));
    browser.screenshot(&screenshot_dir().join("ui-audit.png"));

    // A correction and a deletion made through the API show up in the histories.
    let mut fix = event(
        "customer-42",
        "Invoices go to the new finance portal, not the mailbox",
        "2026-06-01T09:00:00Z",
    );
    fix["eventType"] = json!("correction_received");
    fix["resourceRefs"] = json!(["invoices"]);
    fix["supersedesEventIds"] = json!([invoice]);
    let (status, fix) = server.write(&writer, fix);
    assert_eq!(status, 201);
    let (status, body) = server.call("DELETE", &format!("/v1/events/{tz}"), &approver, None);
    assert_eq!(status, 200, "{body}");
    let open_from_audit = |id: &str| {
        browser.js(
            "document.querySelector('#audit-form select[name=action]').value = ''",
            &json!([]),
        );
        browser.type_into("#audit-form input[name=eventId]", id);
        browser.type_into("#audit-form input[name=limit]", "50");
        browser.click("#audit-form button[type=submit]");
        browser.wait(
            "the event's audit entries",
            "return [...document.querySelectorAll('#audit-rows tr')].every(r =>
                r.querySelector(`button.open-event[data-event-id='${arguments[0]}']`))",
            &json!([id]),
        );
        browser.click(&format!(
            "#audit-rows button.open-event[data-event-id='{id}']"
        ));
    };
    open_from_audit(&invoice);
    let history = browser.history(&invoice, 2);
    assert!(
        history
            .iter()
            .any(|h| h.starts_with("correct") && h.contains(&format!("superseded by {fix}"))),
        "{history:?}"
    );
    let fields = browser.text("#detail-fields");
    assert!(
        fields.contains("superseded") && fields.contains(&fix),
        "{fields}"
    );
    browser.screenshot(&screenshot_dir().join("ui-superseded.png"));
    open_from_audit(&tz);
    let history = browser.history(&tz, 2);
    assert!(
        history.iter().any(|h| h.starts_with("deleted")),
        "{history:?}"
    );
    assert!(browser.text("#detail-note").contains("deleted"));
    assert_eq!(
        browser.text("#detail-fields"),
        "",
        "no content once deleted"
    );
    browser.screenshot(&screenshot_dir().join("ui-deleted.png"));

    // Log out: the key leaves session storage.
    browser.click("#logout");
    assert_eq!(
        browser.js(
            "return sessionStorage.getItem('episodic.apiKey')",
            &json!([])
        ),
        Value::Null
    );
    let console = browser.console();
    let bad: Vec<&Value> = console
        .iter()
        .filter(|e| e["level"] == "SEVERE")
        .filter(|e| {
            let m = e["message"].as_str().unwrap_or_default();
            // Expected: the wrong-key login's 401 and the 404 for the deleted event's content.
            // CSP violations and script errors would land here too, and fail.
            let expected = e["source"] == "network"
                && ((m.contains("/v1/timeline") && m.contains("401"))
                    || (m.contains(&format!("/v1/events/{tz} ")) && m.contains("404")));
            !expected
        })
        .collect();
    assert!(bad.is_empty(), "browser console errors: {bad:?}");

    let (w, h) = png_size(&shot);
    assert!(w >= 1000 && h >= 800, "screenshot is {w}x{h}");
    assert!(
        shot.len() > 30_000,
        "screenshot is only {} bytes",
        shot.len()
    );
    drop(browser);
    server.proc.stop_gracefully();
}
