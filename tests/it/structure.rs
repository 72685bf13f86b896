//! The crate's shape, checked from its source: no import cycle between top-level modules,
//! and the engine side never reaches the edges that speak wire formats.
//!
//! Each file under `src/` belongs to the top-level module of its first path component
//! (`src/read/table.rs` to `read`, `src/telemetry.rs` to `telemetry`); every `crate::name`
//! in its code (comments and doc lines aside) is a dependency on `name`. The graph of those
//! dependencies must have no cycle, so every module can be read after the ones it uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module `file` belongs to (`None` for the crate roots).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// The top-level modules the code of `text` names through `crate::`.
fn dependencies(text: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            // `$crate::` and identifiers ending in `crate` are not the crate root.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                deps.insert(name);
            }
        }
    }
    deps
}

/// A cycle of `graph` through `node`, if any (depth-first, `path` the current chain).
fn find_cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(cycle) = find_cycle(graph, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

/// Which top-level modules each top-level module names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = top_module(&src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        let deps = graph.entry(module.clone()).or_default();
        deps.extend(dependencies(&text).into_iter().filter(|d| *d != module));
    }
    assert!(graph.len() > 10, "the modules were found: {graph:?}");
    graph
}

/// The edges: only these know JSON bodies, problems (`application/problem+json`) and
/// command lines.
const EDGES: [&str; 6] = ["api", "mcp", "ui", "wire", "transfer", "offline_keys"];

#[test]
fn the_engine_side_never_reaches_an_edge() {
    let graph = module_graph();
    let mut reached = BTreeSet::new();
    let mut stack = vec!["engine".to_string()];
    while let Some(m) = stack.pop() {
        if reached.insert(m.clone()) {
            stack.extend(graph.get(&m).into_iter().flatten().cloned());
        }
    }
    for edge in EDGES {
        assert!(
            !reached.contains(edge),
            "the engine reaches `{edge}` (through {reached:?})"
        );
    }
    for m in [
        "retrieve", "read", "auth", "model", "observe", "store", "index",
    ] {
        assert!(
            reached.contains(m),
            "`{m}` is on the engine side: {reached:?}"
        );
    }
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let graph = module_graph();
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let cycle = find_cycle(&graph, module, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle between top-level modules: {}",
            cycle.unwrap_or_default().join(" -> ")
        );
    }
}

#[test]
fn the_cycle_check_sees_crate_paths_and_cycles() {
    let deps = dependencies("use crate::read::Table;\n// crate::api in a comment\nlet x = $crate::y; crate::engine::f();");
    assert_eq!(
        deps,
        BTreeSet::from(["read".to_string(), "engine".to_string()])
    );
    let graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    let cycle = find_cycle(&graph, "a", &mut Vec::new(), &mut BTreeSet::new());
    assert_eq!(cycle, Some(vec!["a".into(), "b".into(), "a".into()]));
}
