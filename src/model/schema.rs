//! JSON Schemas of the wire types, derived from their Rust definitions (utoipa), so a
//! field list is written once: in the type. The OpenAPI document references the types as
//! components; tools that need one self-contained schema (MCP tool inputs) take it with
//! every component reference inlined.
//!
//! Invariant: [`inline`] of a type equals its OpenAPI schema with each `$ref` replaced by
//! the referenced component's schema, recursively.

use serde_json::{Map, Value};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

/// `T`'s JSON Schema with every `#/components/schemas/...` reference inlined.
pub fn inline<T: ToSchema>() -> Value {
    let mut components: Vec<(String, RefOr<Schema>)> = Vec::new();
    T::schemas(&mut components);
    let components: Map<String, Value> = components
        .into_iter()
        .map(|(name, schema)| (name, to_json(&schema)))
        .collect();
    let mut root = to_json(&T::schema());
    resolve(&mut root, &components, 0);
    root
}

/// The property names of `T`'s object schema, in definition order.
pub fn properties<T: ToSchema>() -> Vec<String> {
    match inline::<T>().get("properties") {
        Some(Value::Object(p)) => p.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

fn to_json(schema: &RefOr<Schema>) -> Value {
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// Deepest reference chain followed (the wire types are not recursive).
const MAX_DEPTH: usize = 16;

fn resolve(v: &mut Value, components: &Map<String, Value>, depth: usize) {
    match v {
        Value::Object(map) => {
            let target = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
                .and_then(|name| components.get(name));
            if let (Some(target), true) = (target, depth < MAX_DEPTH) {
                let mut inlined = target.clone();
                resolve(&mut inlined, components, depth + 1);
                // Keep what the referring site says about it (its description).
                if let (Value::Object(into), Some(Value::String(d))) =
                    (&mut inlined, map.get("description"))
                {
                    into.insert("description".into(), Value::String(d.clone()));
                }
                *v = inlined;
                return;
            }
            for child in map.values_mut() {
                resolve(child, components, depth);
            }
        }
        Value::Array(items) => {
            for child in items {
                resolve(child, components, depth);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventInput;

    #[test]
    fn the_event_input_schema_is_self_contained() {
        let schema = inline::<EventInput>();
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert_eq!(
            schema["properties"]["privacyClass"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(4)
        );
        assert_eq!(schema["properties"]["retention"]["type"], "object");
        let fields = properties::<EventInput>();
        assert!(fields.contains(&"summary".to_string()) && fields.contains(&"eventId".to_string()));
        let required = schema["required"].as_array().expect("required");
        assert!(
            !required.contains(&serde_json::json!("supersedesEventIds")),
            "validation does not require it, so neither does the schema"
        );
    }
}
