//! What an LLM column tells the model about the answer it wants (JSON under a schema, code in
//! a language, judge scores) and how the answer is read back: DataDesigner's instructions,
//! word for word, and its lenient JSON extraction from fences or braces, the answer read as
//! the column's value ([`parse_answer`]).

use serde_json::{Map, Value, json};

use super::code::extract_code;
use crate::domain::dataset::{CODE_LANGS, LlmKind, Score};
use crate::pytext::{json_dumps, repr_str};

/// A ```json fence, else any fence, else the text from the first `{`/`[` to the last `}`/`]`.
pub(crate) fn extract_json(text: &str) -> &str {
    if let Some(body) = fenced(text, Some("json")).or_else(|| fenced(text, None)) {
        return body.trim();
    }
    let start = text.find(['{', '[']);
    let end = text.rfind(['}', ']']);
    match (start, end) {
        (Some(s), Some(e)) if s < e => &text[s..=e],
        _ => text.trim(),
    }
}

/// The body of the first fence whose info string is `lang` (any fence when `None`).
fn fenced<'t>(text: &'t str, lang: Option<&str>) -> Option<&'t str> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let line_end = after.find('\n')?;
        let info = after[..line_end].trim();
        let body_start = &after[line_end + 1..];
        let close = body_start.find("```")?;
        if lang.is_none_or(|l| info.eq_ignore_ascii_case(l)) {
            return Some(&body_start[..close]);
        }
        rest = &body_start[close + 3..];
    }
    None
}

/// DataDesigner's instructions for a JSON answer, word for word (its `StructuredResponseRecipe`),
/// the schema printed as Python's `json.dumps` prints it.
pub(super) fn json_instructions(schema: &Value) -> String {
    format!(
        "* Your response must be in JSON format.\n\
         * Your JSON response must be returned within a Markdown, ```json code fence.\n\
         * The JSON format is given as a JSON Schema description within <response_schema> markup tags.\n\n\
         <response_schema>\n{}\n</response_schema>",
        json_dumps(schema, false)
    )
}

/// DataDesigner's instructions for a code answer, word for word (its `CodeResponseRecipe`),
/// naming the language without its SQL dialect (`sql:postgres` says `sql`), as it does.
pub(super) fn code_instructions(lang: &str) -> String {
    let lang = lang.split(':').next().unwrap_or(lang);
    format!(
        "* Your response must be code written in {lang}.\n\
         * You will follow accepted and common syntax and best-practices.\n\
         * Your response will be given in markdown code fences specifying the correct language.\n\
         * Only respond with a SINGLE code block."
    )
}

/// `text` with the control characters that stand raw inside JSON strings (a newline in a
/// `reasoning`, which small models write and some servers' JSON grammars let through)
/// written as escapes, so the answer parses as the model meant it, as Python's
/// `json.loads(strict=False)` would read it. Outside strings nothing changes.
fn escape_raw_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string && !escaped && c.is_ascii_control() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c => out.push_str(&format!("\\u{:04x}", c as u32)),
            }
            continue;
        }
        out.push(c);
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        }
    }
    out
}

/// DataDesigner's judge output schema, as pydantic writes it for the model DataDesigner builds
/// (`create_judge_structured_output_model` over one `create_judge_response_model` per score)
/// and DataDesigner prints in the prompt: `{score_name: {"reasoning": str, "score": option}}`,
/// each score a `$defs` entry (its description, when it has one) whose `score` refers to an
/// enum of the options, described as `* option: description` lines; `$defs` in pydantic's
/// (sorted) order. An option is a key of the score's `options` as the config gives it:
/// DataDesigner's builder writes them as strings (`'1'`), so the enum is of strings.
pub(super) fn judge_schema(scores: &[Score]) -> Value {
    let mut defs = std::collections::BTreeMap::new();
    for s in scores {
        let enum_name = format!("{}Enum", s.name);
        let scoring: Vec<String> = s
            .options
            .iter()
            .map(|(k, v)| {
                format!(
                    "* {k}: {}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                )
            })
            .collect();
        let mut def = Map::new();
        if !s.description.is_empty() {
            def.insert("description".into(), json!(s.description));
        }
        def.insert(
            "properties".into(),
            json!({
                "reasoning": {"description": "Reasoning for the assigned score.",
                              "title": "Reasoning", "type": "string"},
                "score": {"$ref": format!("#/$defs/{enum_name}"),
                          "description": format!("Score Descriptions for {enum_name}:\n{}", scoring.join("\n"))},
            }),
        );
        def.insert("required".into(), json!(["reasoning", "score"]));
        def.insert("title".into(), json!(s.name));
        def.insert("type".into(), json!("object"));
        defs.insert(s.name.clone(), Value::Object(def));
        let options: Vec<Value> = s.options.keys().map(|k| json!(k)).collect();
        defs.insert(
            enum_name.clone(),
            json!({"enum": options, "title": enum_name, "type": "string"}),
        );
    }
    let names: Vec<String> = scores.iter().map(|s| repr_str(&s.name)).collect();
    let properties: Map<String, Value> = scores
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                json!({"$ref": format!("#/$defs/{}", s.name)}),
            )
        })
        .collect();
    let required: Vec<&str> = scores.iter().map(|s| s.name.as_str()).collect();
    json!({
        "$defs": defs.into_iter().collect::<Map<String, Value>>(),
        "description": format!(
            "Response schema for scores with the following names: [{}].",
            names.join(", ")
        ),
        "properties": properties,
        "required": required,
        "title": "JudgeStructuredOutput",
        "type": "object",
    })
}

/// DataDesigner's score coercion, before the schema check: a model's `score` that is not one
/// of the options as written but matches exactly one of them once both are normalized (text
/// trimmed and case-folded, `3` and `3.0` read as `"3"`) becomes that option, so `3` answers
/// option `"3"` and `"Good "` answers `"good"`. A boolean never matches a number's option.
pub(super) fn coerce_judge_scores(scores: &[Score], value: &mut Value) {
    fn normalize(v: &Value) -> String {
        match v {
            Value::String(s) => s.trim().to_lowercase(),
            Value::Number(n) => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && n.as_i64().is_none() && n.as_u64().is_none() => {
                    format!("{}", f as i64)
                }
                _ => n.to_string(),
            },
            other => other.to_string().to_lowercase(),
        }
    }
    for s in scores {
        let Some(score) = value.get_mut(&s.name).and_then(|v| v.get_mut("score")) else {
            continue;
        };
        if score.as_str().is_some_and(|v| s.options.contains_key(v)) {
            continue;
        }
        let wanted = normalize(score);
        let mut matches = s
            .options
            .keys()
            .filter(|k| k.trim().to_lowercase() == wanted);
        if let (Some(key), None) = (matches.next(), matches.next()) {
            *score = Value::String(key.clone());
        }
    }
}

/// DataDesigner's judge instructions: its JSON instructions with the judge schema, which
/// carries the rubric (each score's description and options) in its descriptions.
pub(super) fn judge_instructions(schema: &Value) -> String {
    json_instructions(schema)
}

/// A column value of `kind` from the model's (stripped) text: the text, the code of its last
/// fence, or JSON from fences or braces (judge scores coerced) checked against `validator`.
/// The `Err` is what the correction turn tells the model.
pub(super) fn parse_answer(
    kind: &LlmKind,
    validator: Option<&jsonschema::Validator>,
    text: &str,
) -> Result<Value, String> {
    match kind {
        LlmKind::Text => Ok(Value::String(text.to_owned())),
        LlmKind::Code { code_lang } => extract_code(text, code_lang).map(Value::String),
        LlmKind::Structured { .. } | LlmKind::Judge { .. } => {
            let raw = extract_json(text);
            let mut value: Value = serde_json::from_str(raw)
                .or_else(|e| serde_json::from_str(&escape_raw_controls(raw)).map_err(|_| e))
                .map_err(|e| format!("the response is not valid JSON ({e})"))?;
            if let LlmKind::Judge { scores } = kind {
                coerce_judge_scores(scores, &mut value);
            }
            if let Some(v) = validator {
                let errors: Vec<String> = v
                    .iter_errors(&value)
                    .take(3)
                    .map(|e| format!("{} at '{}'", e, e.instance_path()))
                    .collect();
                if !errors.is_empty() {
                    return Err(format!(
                        "the JSON does not match the schema: {}",
                        errors.join("; ")
                    ));
                }
            }
            Ok(value)
        }
    }
}

/// The readers of a model's final text, for the fuzz target `llm_answer` (`crate::fuzzing`):
/// the code of each language, JSON under a schema of each JSON-valued kind, judge scores.
#[doc(hidden)]
pub(crate) fn parse_answers_for_fuzzing(text: &str) {
    for lang in CODE_LANGS {
        let kind = LlmKind::Code {
            code_lang: (*lang).to_owned(),
        };
        let _ = parse_answer(&kind, None, text);
    }
    let scores: Vec<Score> = serde_json::from_value(json!([
        {"name": "quality", "description": "q", "options": {"1": "bad", "2": "good"}},
        {"name": "tone", "description": "t", "options": {"formal": "f", "casual": "c"}}
    ]))
    .expect("a fixed score list");
    let judge = jsonschema::validator_for(&judge_schema(&scores)).ok();
    let _ = parse_answer(&LlmKind::Judge { scores }, judge.as_ref(), text);
    let Value::Object(output_format) = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            "score": {"type": "number", "minimum": 0},
            "nested": {"type": "object", "additionalProperties": {"type": "integer"}}
        },
        "required": ["name"]
    }) else {
        return;
    };
    let structured = jsonschema::validator_for(&Value::Object(output_format.clone())).ok();
    let _ = parse_answer(
        &LlmKind::Structured { output_format },
        structured.as_ref(),
        text,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_control_characters_inside_strings_are_read_as_escapes() {
        let kind = LlmKind::Structured {
            output_format: Map::new(),
        };
        let text = "{\"reasoning\": \"line one\nline\ttwo \\\"q\\\"\",\n \"score\": \"3\"}";
        assert_eq!(
            parse_answer(&kind, None, text).unwrap(),
            json!({"reasoning": "line one\nline\ttwo \"q\"", "score": "3"})
        );
        assert!(parse_answer(&kind, None, "{\"a\": \"unterminated\n").is_err());
    }

    /// The texts DataDesigner 0.9.6 appends (`response_recipes.py`), as Python builds them:
    /// `json.dumps` of the schema, the code language without its SQL dialect.
    #[test]
    fn instructions_are_datadesigners_word_for_word() {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string",
            "description": "café ☕ 🐈"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["name"]});
        assert_eq!(
            json_instructions(&schema),
            "* Your response must be in JSON format.\n\
             * Your JSON response must be returned within a Markdown, ```json code fence.\n\
             * The JSON format is given as a JSON Schema description within <response_schema> markup tags.\n\n\
             <response_schema>\n\
             {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \
             \"description\": \"caf\\u00e9 \\u2615 \\ud83d\\udc08\"}, \"tags\": {\"type\": \"array\", \
             \"items\": {\"type\": \"string\"}}}, \"required\": [\"name\"]}\n\
             </response_schema>"
        );
        assert_eq!(
            code_instructions("sql:postgres"),
            "* Your response must be code written in sql.\n\
             * You will follow accepted and common syntax and best-practices.\n\
             * Your response will be given in markdown code fences specifying the correct language.\n\
             * Only respond with a SINGLE code block."
        );
        assert!(
            code_instructions("python")
                .starts_with("* Your response must be code written in python.\n")
        );
        assert_eq!(
            json_dumps(&json!([1, 2.5, null, true, {}]), false),
            "[1, 2.5, null, true, {}]"
        );
    }

    #[test]
    fn json_is_found_in_fences_or_braces() {
        assert_eq!(extract_json("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(extract_json("sure! {\"a\": [1]} done"), "{\"a\": [1]}");
        assert_eq!(extract_json("```\n[1,2]\n```"), "[1,2]");
    }

    #[test]
    fn the_judge_schema_prints_as_datadesigners_pydantic_model() {
        // What DataDesigner 0.9.6 prints for these scores (`json.dumps` of
        // `create_judge_structured_output_model(...).model_json_schema()`), captured.
        let scores = vec![
            Score {
                name: "quality".into(),
                description: "How good it is".into(),
                options: serde_json::from_value(json!({"4": "great", "1": "poor"})).unwrap(),
            },
            Score {
                name: "Tone".into(),
                description: String::new(),
                options: serde_json::from_value(json!({"formal": "stiff"})).unwrap(),
            },
        ];
        let theirs = concat!(
            r##"{"$defs": {"Tone": {"properties": {"reasoning": {"description": "Reasoning for the assigned score.", "title": "Reasoning", "type": "string"}, "##,
            r##""score": {"$ref": "#/$defs/ToneEnum", "description": "Score Descriptions for ToneEnum:\n* formal: stiff"}}, "required": ["reasoning", "score"], "##,
            r##""title": "Tone", "type": "object"}, "ToneEnum": {"enum": ["formal"], "title": "ToneEnum", "type": "string"}, "##,
            r##""quality": {"description": "How good it is", "properties": {"reasoning": {"description": "Reasoning for the assigned score.", "title": "Reasoning", "type": "string"}, "##,
            r##""score": {"$ref": "#/$defs/qualityEnum", "description": "Score Descriptions for qualityEnum:\n* 4: great\n* 1: poor"}}, "required": ["reasoning", "score"], "##,
            r##""title": "quality", "type": "object"}, "qualityEnum": {"enum": ["4", "1"], "title": "qualityEnum", "type": "string"}}, "##,
            r##""description": "Response schema for scores with the following names: ['quality', 'Tone'].", "##,
            r##""properties": {"quality": {"$ref": "#/$defs/quality"}, "Tone": {"$ref": "#/$defs/Tone"}}, "##,
            r##""required": ["quality", "Tone"], "title": "JudgeStructuredOutput", "type": "object"}"##
        );
        assert_eq!(json_dumps(&judge_schema(&scores), false), theirs);
        assert_eq!(repr_str("it's"), "\"it's\"");
        assert_eq!(repr_str("a'\"b"), "'a\\'\"b'");
    }

    #[test]
    fn judge_scores_answer_with_the_option_as_written() {
        let scores = vec![
            Score {
                name: "quality".into(),
                description: "How good".into(),
                options: serde_json::from_value(json!({"1": "bad", "2": "good"})).unwrap(),
            },
            Score {
                name: "tone".into(),
                description: "Which tone".into(),
                options: serde_json::from_value(json!({"Warm": "w", "cold": "c", "1": "one"}))
                    .unwrap(),
            },
        ];
        let v = jsonschema::validator_for(&judge_schema(&scores)).unwrap();
        let answer = |quality: Value, tone: Value| {
            let mut a = json!({"quality": {"reasoning": "r", "score": quality},
                "tone": {"reasoning": "r", "score": tone}});
            coerce_judge_scores(&scores, &mut a);
            let valid = v.is_valid(&a);
            (
                a["quality"]["score"].clone(),
                a["tone"]["score"].clone(),
                valid,
            )
        };
        // As DataDesigner does: the option key, a string, whatever the model wrote.
        assert_eq!(
            answer(json!(2), json!("warm")),
            (json!("2"), json!("Warm"), true)
        );
        assert_eq!(
            answer(json!(2.0), json!(" COLD ")),
            (json!("2"), json!("cold"), true)
        );
        assert_eq!(answer(json!("1"), json!(1)), (json!("1"), json!("1"), true));
        // No option matches: left as it is, and the schema refuses it.
        assert!(!answer(json!(3), json!("warm")).2);
        assert_eq!(answer(json!(true), json!("warm")).0, json!(true));
        assert!(!v.is_valid(&json!({})));
    }
}
