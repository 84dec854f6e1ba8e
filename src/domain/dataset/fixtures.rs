//! Test fixtures: the config DataDesigner 0.9.7 really serializes (behaviour reference §1.7).

use serde_json::{Value, json};

/// `DataDesignerConfigBuilder(...).get_builder_config().to_yaml()` from data-designer-config 0.9.7.
pub(crate) const REAL_YAML: &str = r#"data_designer:
  columns:
  - column_type: sampler
    conditional_params: {}
    convert_to: null
    drop: false
    name: topic
    params:
      sampler_type: category
      values:
      - math
      - history
      weights: null
    propagate_skip: true
    sampler_type: category
    skip: null
  - column_type: llm-text
    drop: false
    extract_reasoning_content: false
    model_alias: nvidia-text
    multi_modal_context: null
    name: answer
    prompt: Use tools as needed to answer a question about {{ topic }}
    propagate_skip: true
    skip: null
    system_prompt: null
    tool_alias: my-tools
    with_trace: all_messages
  - column_type: llm-structured
    drop: false
    extract_reasoning_content: false
    model_alias: nvidia-text
    multi_modal_context: null
    name: summary
    output_format:
      properties:
        score:
          type: integer
        title:
          type: string
      required:
      - title
      - score
      type: object
    prompt: 'Summarize: {{ answer }}'
    propagate_skip: true
    skip: null
    system_prompt: null
    tool_alias: null
    with_trace: none
  constraints: null
  model_configs:
  - alias: nvidia-text
    inference_parameters:
      extra_body: null
      generation_type: chat-completion
      max_parallel_requests: 8
      max_tokens: 1024
      temperature: 0.7
      timeout: 120
      top_p: 0.95
    model: nvidia/nemotron-3-nano-30b-a3b
    provider: nvidia
    skip_health_check: false
  processors: null
  profilers: null
  seed_config: null
  tool_configs:
  - allow_tools:
    - get_fact
    - add_numbers
    max_tool_call_turns: 5
    providers:
    - demo-mcp
    timeout_sec: 45.0
    tool_alias: my-tools
library_version: 0.9.7
"#;

/// The same config as `to_json()` writes it: field order, `sampler_type` injected last.
pub(crate) fn real_json() -> Value {
    json!({
      "data_designer": {
        "columns": [
          {"name": "topic", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true,
           "sampler_type": "category",
           "params": {"values": ["math", "history"], "weights": null, "sampler_type": "category"},
           "conditional_params": {}, "convert_to": null},
          {"name": "answer", "drop": false, "column_type": "llm-text", "skip": null, "propagate_skip": true,
           "prompt": "Use tools as needed to answer a question about {{ topic }}",
           "model_alias": "nvidia-text", "system_prompt": null, "multi_modal_context": null,
           "tool_alias": "my-tools", "with_trace": "all_messages", "extract_reasoning_content": false},
          {"name": "summary", "drop": false, "column_type": "llm-structured", "skip": null, "propagate_skip": true,
           "prompt": "Summarize: {{ answer }}", "model_alias": "nvidia-text", "system_prompt": null,
           "multi_modal_context": null, "tool_alias": null, "with_trace": "none",
           "extract_reasoning_content": false,
           "output_format": {"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
                             "required": ["title", "score"]}}
        ],
        "model_configs": [
          {"alias": "nvidia-text", "model": "nvidia/nemotron-3-nano-30b-a3b",
           "inference_parameters": {"generation_type": "chat-completion", "max_parallel_requests": 8,
             "timeout": 120, "extra_body": null, "temperature": 0.7, "top_p": 0.95, "max_tokens": 1024},
           "provider": "nvidia", "skip_health_check": false}
        ],
        "tool_configs": [
          {"tool_alias": "my-tools", "providers": ["demo-mcp"], "allow_tools": ["get_fact", "add_numbers"],
           "max_tool_call_turns": 5, "timeout_sec": 45.0}
        ],
        "seed_config": null, "constraints": null, "profilers": null, "processors": null
      },
      "library_version": "0.9.7"
    })
}
