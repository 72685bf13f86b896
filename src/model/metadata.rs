//! Free-form `metadata` on events ([`Metadata`]) and the equality filters over it
//! ([`MetaFilter`]).
//!
//! Invariants:
//! - Metadata is a JSON object of at most [`MAX_DEPTH`] nested levels whose leaves are
//!   strings, finite numbers or booleans (no nulls, no arrays); keys are 1–64 bytes of
//!   `[A-Za-z0-9_:-]` (never `.`, which joins a leaf's path); at most [`MAX_LEAVES`] leaves
//!   and [`MAX_METADATA_BYTES`] bytes of compact JSON. Nothing else is ever stored.
//! - String leaves are kept in NFC, as ids are, so equal-looking text compares equal.
//! - Every leaf is indexed as one [`term`]: its dotted path, its kind (string, number,
//!   boolean) and its canonical value. Two leaves are equal iff their terms are, so a filter
//!   matches exactly the events whose leaf at the path equals one of its values: the string
//!   `"1"` never matches the number `1`, and `1`, `1.0` and `1e0` are one number.
//! - An empty object and an absent field are the same: no metadata.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use crate::error::FieldError;

/// Most bytes of an event's metadata, as compact JSON.
pub const MAX_METADATA_BYTES: usize = 4096;
/// Most nested levels (the top-level object is the first).
pub const MAX_DEPTH: usize = 3;
/// Most leaves (string, number and boolean values) per event: each is one index term.
pub const MAX_LEAVES: usize = 32;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 64;
/// Most keys one filter may name.
pub const MAX_FILTER_KEYS: usize = 16;
/// Most values one filter key may list (any-of).
pub const MAX_FILTER_VALUES: usize = 64;

/// An event's metadata: validated, string leaves in NFC, keys sorted. Held as its compact
/// JSON text (keys sorted), which is parsed when read: a live event's metadata costs its
/// text's bytes in memory, not a tree of maps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata(Option<Box<str>>);

impl Metadata {
    /// No metadata.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The object (empty when none).
    pub fn as_map(&self) -> Map<String, Value> {
        self.0
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }

    fn from_map(map: &Map<String, Value>) -> Metadata {
        if map.is_empty() {
            return Metadata(None);
        }
        Metadata(serde_json::to_string(&map).ok().map(String::into_boxed_str))
    }

    /// Its compact JSON text, keys sorted (`None` when empty).
    pub fn text(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Validates `value` (the body's `field`), reporting every problem at its path.
    pub fn parse(field: &str, value: &Value) -> Result<Metadata, Vec<FieldError>> {
        let Value::Object(obj) = value else {
            return Err(vec![FieldError::new(
                field,
                "must be an object of string, number and boolean values",
            )]);
        };
        let mut errors = Vec::new();
        let mut leaves = 0;
        let map = read_object(obj, field, 1, &mut leaves, &mut errors);
        if leaves > MAX_LEAVES {
            errors.push(FieldError::new(
                field,
                format!("has {leaves} values; at most {MAX_LEAVES} are allowed"),
            ));
        }
        let metadata = Metadata::from_map(&map);
        let bytes = metadata.text().map_or(0, str::len);
        if bytes > MAX_METADATA_BYTES {
            errors.push(FieldError::new(
                field,
                format!("is {bytes} bytes as JSON; at most {MAX_METADATA_BYTES} are allowed"),
            ));
        }
        if errors.is_empty() {
            Ok(metadata)
        } else {
            Err(errors)
        }
    }

    /// Every leaf with its dotted path, in key order.
    pub fn leaves(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        collect_leaves(self.as_map(), "", &mut out);
        out
    }

    /// The leaf at a dotted `path`, if any.
    pub fn leaf(&self, path: &str) -> Option<Value> {
        leaf_in(&self.as_map(), path).cloned()
    }

    /// Every string leaf (what the privacy and credential detectors read).
    pub fn strings(&self) -> Vec<String> {
        self.leaves()
            .into_iter()
            .filter_map(|(_, v)| match v {
                Value::String(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    /// The index terms of every leaf ([`term`]).
    pub fn terms(&self) -> Vec<String> {
        self.leaves()
            .into_iter()
            .filter_map(|(path, v)| term(&path, &v))
            .collect()
    }
}

impl Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    /// Reads metadata as stored (already validated when written): any object.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Metadata::from_map(&Map::deserialize(deserializer)?))
    }
}

/// The leaf at a dotted `path` of `map`, if any (an object is not a leaf).
fn leaf_in<'m>(map: &'m Map<String, Value>, path: &str) -> Option<&'m Value> {
    let mut parts = path.split('.');
    let mut value = map.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    (!value.is_object()).then_some(value)
}

fn read_object(
    obj: &Map<String, Value>,
    path: &str,
    depth: usize,
    leaves: &mut usize,
    errors: &mut Vec<FieldError>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in obj {
        let at = format!("{path}.{key}");
        if let Err(why) = check_key(key) {
            errors.push(FieldError::new(&at, why));
            continue;
        }
        match value {
            Value::String(s) => {
                *leaves += 1;
                out.insert(key.clone(), Value::String(s.nfc().collect()));
            }
            Value::Bool(_) => {
                *leaves += 1;
                out.insert(key.clone(), value.clone());
            }
            Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => {
                *leaves += 1;
                out.insert(key.clone(), value.clone());
            }
            Value::Number(_) => errors.push(FieldError::new(&at, "must be a finite number")),
            Value::Object(inner) if depth < MAX_DEPTH => {
                let inner = read_object(inner, &at, depth + 1, leaves, errors);
                out.insert(key.clone(), Value::Object(inner));
            }
            Value::Object(_) => errors.push(FieldError::new(
                &at,
                format!("nests too deep: metadata has at most {MAX_DEPTH} levels"),
            )),
            Value::Null => errors.push(FieldError::new(
                &at,
                "must be a string, number, boolean or object (omit the key instead of null)",
            )),
            Value::Array(_) => errors.push(FieldError::new(
                &at,
                "must be a string, number, boolean or object (arrays are not stored; use \
                 one key per value)",
            )),
        }
    }
    out
}

/// Why `key` cannot be a metadata key, if it cannot.
fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(format!("keys are 1-{MAX_KEY_BYTES} bytes"));
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'))
    {
        return Err("keys use only letters, digits, '_', '-' and ':' ('.' joins paths)".into());
    }
    Ok(())
}

fn collect_leaves(map: Map<String, Value>, prefix: &str, out: &mut Vec<(String, Value)>) {
    for (key, value) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Object(inner) => collect_leaves(inner, &path, out),
            _ => out.push((path, value)),
        }
    }
}

/// The index term of a leaf: `path=` then `s`, `n` or `b` and the canonical value (a
/// number's shortest form, an integral one without a fraction). `None` for an object,
/// array or null, which are never leaves.
pub fn term(path: &str, value: &Value) -> Option<String> {
    let (kind, canonical) = match value {
        Value::String(s) => ('s', s.clone()),
        Value::Bool(b) => ('b', b.to_string()),
        Value::Number(n) => ('n', canonical_number(n)?),
        _ => return None,
    };
    Some(format!("{path}={kind}{canonical}"))
}

fn canonical_number(n: &serde_json::Number) -> Option<String> {
    if let Some(i) = n.as_i64() {
        return Some(i.to_string());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.to_string());
    }
    let f = n.as_f64().filter(|f| f.is_finite())?;
    // Integral values within f64's exact integer range read as integers (1.0 == 1).
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Some(format!("{}", f as i64));
    }
    Some(format!("{f:?}"))
}

/// An equality filter on metadata: every named path must hold one of its values (any-of
/// within a path, all of the paths).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaFilter {
    /// Per path (sorted), the terms of its accepted values.
    pub clauses: Vec<(String, Vec<String>)>,
}

impl MetaFilter {
    /// No condition.
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }

    /// Whether `metadata` satisfies every clause.
    pub fn matches(&self, metadata: &Metadata) -> bool {
        if self.clauses.is_empty() {
            return true;
        }
        // The text is parsed once for every clause.
        let map = metadata.as_map();
        self.clauses.iter().all(|(path, terms)| {
            leaf_in(&map, path)
                .and_then(|v| term(path, v))
                .is_some_and(|t| terms.contains(&t))
        })
    }

    /// Validates a scope's `metadata` (`{path: value}` or `{path: [values]}`, at `field`).
    pub fn parse(
        field: &str,
        raw: &BTreeMap<String, Value>,
        errors: &mut Vec<FieldError>,
    ) -> MetaFilter {
        if raw.len() > MAX_FILTER_KEYS {
            errors.push(FieldError::new(
                field,
                format!("names {} keys; at most {MAX_FILTER_KEYS}", raw.len()),
            ));
            return MetaFilter::default();
        }
        let mut clauses = Vec::new();
        for (path, value) in raw {
            let at = format!("{field}.{path}");
            if let Some(bad) = path.split('.').find_map(|k| check_key(k).err()) {
                errors.push(FieldError::new(
                    &at,
                    format!("is not a metadata path: {bad}"),
                ));
                continue;
            }
            if path.split('.').count() > MAX_DEPTH {
                errors.push(FieldError::new(
                    &at,
                    format!("is deeper than metadata may nest ({MAX_DEPTH} levels)"),
                ));
                continue;
            }
            let values: Vec<&Value> = match value {
                Value::Array(items) if items.is_empty() || items.len() > MAX_FILTER_VALUES => {
                    errors.push(FieldError::new(
                        &at,
                        format!("lists 1-{MAX_FILTER_VALUES} values"),
                    ));
                    continue;
                }
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            let mut terms = Vec::new();
            for v in values {
                let normalized = match v {
                    Value::String(s) => Value::String(s.nfc().collect()),
                    other => other.clone(),
                };
                match term(path, &normalized) {
                    Some(t) => terms.push(t),
                    None => errors.push(FieldError::new(
                        &at,
                        "must be a string, number or boolean, or a list of them (equality, \
                         any-of)",
                    )),
                }
            }
            terms.sort_unstable();
            terms.dedup();
            clauses.push((path.clone(), terms));
        }
        MetaFilter { clauses }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: &Value) -> Result<Metadata, Vec<String>> {
        Metadata::parse("metadata", v).map_err(|e| e.into_iter().map(|e| e.field).collect())
    }

    #[test]
    fn accepts_scalars_and_nesting_and_reads_leaves() {
        let m = parse(&json!({"channel": "email", "n": 3, "ok": true, "a": {"b": {"c": "deep"}}}))
            .expect("valid");
        let paths: Vec<String> = m.leaves().into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, vec!["a.b.c", "channel", "n", "ok"]);
        assert_eq!(m.leaf("a.b.c"), Some(json!("deep")));
        assert_eq!(m.leaf("a.b"), None, "an object is not a leaf");
        assert_eq!(m.leaf("missing"), None);
    }

    #[test]
    fn refuses_each_bad_part_at_its_path() {
        let got = parse(&json!({
            "nul": null, "list": [1], "bad.key": 1, "": 2,
            "a": {"b": {"c": {"d": 1}}}
        }))
        .expect_err("invalid");
        for f in [
            "metadata.nul",
            "metadata.list",
            "metadata.bad.key",
            "metadata.",
            "metadata.a.b.c",
        ] {
            assert!(got.contains(&f.to_string()), "{f} in {got:?}");
        }
        assert_eq!(
            parse(&json!("text")).expect_err("not an object"),
            vec!["metadata"]
        );
        let many: Map<String, Value> = (0..=MAX_LEAVES)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        assert_eq!(
            parse(&Value::Object(many)).expect_err("too many"),
            vec!["metadata"]
        );
        let big = json!({"t": "x".repeat(MAX_METADATA_BYTES)});
        assert_eq!(parse(&big).expect_err("too big"), vec!["metadata"]);
    }

    #[test]
    fn terms_keep_kinds_apart_and_numbers_canonical() {
        assert_eq!(term("k", &json!(1)), term("k", &json!(1.0)));
        assert_eq!(term("k", &json!(1)), Some("k=n1".into()));
        assert_ne!(term("k", &json!(1)), term("k", &json!("1")));
        assert_ne!(term("k", &json!(true)), term("k", &json!("true")));
        assert_eq!(term("k", &json!(0.5)), Some("k=n0.5".into()));
        assert_eq!(term("k", &json!(null)), None);
    }

    #[test]
    fn string_leaves_are_kept_in_nfc_and_filters_match_them() {
        let m = parse(&json!({"city": "cafe\u{301}"})).expect("valid");
        assert_eq!(m.leaf("city"), Some(json!("caf\u{e9}")));
        let mut errors = Vec::new();
        let raw = BTreeMap::from([("city".to_string(), json!("cafe\u{301}"))]);
        let f = MetaFilter::parse("scope.metadata", &raw, &mut errors);
        assert!(errors.is_empty());
        assert!(f.matches(&m));
    }

    #[test]
    fn filters_are_all_of_paths_and_any_of_values() {
        let m = parse(&json!({"channel": "email", "tier": 2, "p": {"q": true}})).expect("valid");
        let filter = |v: Value| {
            let raw: BTreeMap<String, Value> = serde_json::from_value(v).expect("map");
            let mut errors = Vec::new();
            let f = MetaFilter::parse("scope.metadata", &raw, &mut errors);
            assert!(errors.is_empty(), "{errors:?}");
            f
        };
        assert!(filter(json!({"channel": "email"})).matches(&m));
        assert!(filter(json!({"channel": ["sms", "email"], "tier": 2.0})).matches(&m));
        assert!(filter(json!({"p.q": true})).matches(&m));
        assert!(!filter(json!({"channel": "email", "tier": 3})).matches(&m));
        assert!(!filter(json!({"tier": "2"})).matches(&m));
        assert!(
            !filter(json!({"p": true})).matches(&m),
            "an object is not a value"
        );
        assert!(!filter(json!({"absent": "x"})).matches(&m));
    }

    #[test]
    fn bad_filters_name_their_path() {
        let raw: BTreeMap<String, Value> =
            serde_json::from_value(json!({"a b": 1, "k": [], "n": null, "o": {"x": 1}}))
                .expect("map");
        let mut errors = Vec::new();
        MetaFilter::parse("scope.metadata", &raw, &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "scope.metadata.a b",
                "scope.metadata.k",
                "scope.metadata.n",
                "scope.metadata.o"
            ]
        );
    }
}
