//! The tools' output schemas, taken from the OpenAPI document's components: the results are
//! the REST responses' DTOs, whose schemas utoipa already derives (and `openapi.yaml` pins), so
//! deriving a second set with schemars would be a second truth to keep in step.
//!
//! OpenAPI 3.1 schemas are JSON Schema 2020-12; only the references move, from
//! `#/components/schemas/X` to `#/$defs/X`, with the referenced components copied into `$defs`
//! so each output schema stands alone (MCP clients resolve references within the schema).

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Map, Value};

const COMPONENT_REF: &str = "#/components/schemas/";
const DEF_REF: &str = "#/$defs/";

/// The component schemas of the API's OpenAPI document.
pub struct Components(Map<String, Value>);

impl Components {
    /// Reads them from the API's OpenAPI document.
    pub fn from_api() -> Self {
        let (_, spec) = crate::api::openapi_router().split_for_parts();
        let schemas = serde_json::to_value(&spec)
            .ok()
            .and_then(|v| v.pointer("/components/schemas").cloned());
        match schemas {
            Some(Value::Object(map)) => Self(map),
            _ => Self(Map::new()),
        }
    }

    /// The standalone schema of component `name`: its own schema at the root, the components
    /// it reaches in `$defs`. `None` if the document has no such component.
    pub fn output_schema(&self, name: &str) -> Option<Arc<JsonObject>> {
        let Some(Value::Object(root)) = self.0.get(name) else {
            return None;
        };
        // The components reachable from the root.
        let mut reached = BTreeSet::new();
        let mut queue = Vec::new();
        refs(&Value::Object(root.clone()), &mut queue);
        while let Some(next) = queue.pop() {
            if reached.insert(next.clone())
                && let Some(schema) = self.0.get(&next)
            {
                refs(schema, &mut queue);
            }
        }
        let mut out = root.clone();
        // MCP clients expect an object schema at the root. Every result is a JSON object; a
        // component built with `allOf` (a flattened struct) says so only in its parts.
        out.entry("type").or_insert_with(|| "object".into());
        if !reached.is_empty() {
            let defs: Map<String, Value> = reached
                .into_iter()
                .filter_map(|n| self.0.get(&n).map(|s| (n, s.clone())))
                .collect();
            out.insert("$defs".into(), Value::Object(defs));
        }
        let mut out = Value::Object(out);
        rewrite_refs(&mut out);
        match out {
            Value::Object(map) => Some(Arc::new(map)),
            _ => None,
        }
    }
}

/// Pushes the component names `value` refers to.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(COMPONENT_REF) {
                            out.push(name.to_owned());
                        }
                    }
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// Points every component reference at `$defs`.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(r) if k == "$ref" => {
                        if let Some(name) = r.strip_prefix(COMPONENT_REF) {
                            *r = format!("{DEF_REF}{name}");
                        }
                    }
                    _ => rewrite_refs(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_move_to_defs_with_what_they_reach() {
        let components = Components(
            json!({
                "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
                "B": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/components/schemas/C"}}}},
                "C": {"type": "string"},
                "Unrelated": {"type": "integer"}
            })
            .as_object()
            .cloned()
            .unwrap(),
        );
        let schema = Value::Object((*components.output_schema("A").unwrap()).clone());
        assert_eq!(schema["properties"]["b"]["$ref"], "#/$defs/B");
        assert_eq!(
            schema["$defs"]["B"]["properties"]["c"]["items"]["$ref"],
            "#/$defs/C"
        );
        assert_eq!(schema["$defs"]["C"]["type"], "string");
        assert!(schema["$defs"].get("Unrelated").is_none());
        assert!(components.output_schema("Missing").is_none());
    }

    #[test]
    fn the_api_document_has_every_result_type() {
        let components = Components::from_api();
        for name in super::super::tools::OUTPUTS.iter().map(|(_, c)| c) {
            let schema = components
                .output_schema(name)
                .unwrap_or_else(|| panic!("no component {name}"));
            assert_eq!(schema.get("type"), Some(&json!("object")), "{name}");
            assert!(
                !Value::Object((*schema).clone())
                    .to_string()
                    .contains(COMPONENT_REF),
                "{name}"
            );
        }
    }
}
