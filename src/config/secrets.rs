//! Every secret the config holds, as the log redactor needs them (see `telemetry`).

use secrecy::{ExposeSecret, SecretString};

use super::Config;
use super::providers::resolve_api_key;

impl Config {
    /// The values of every secret in the config: keys, tokens, passwords, header values and
    /// child environments. A value that names an environment variable (DataDesigner's rule for
    /// `api_key` and OAuth credentials) counts twice: as configured and as resolved. Empty and
    /// very short values are left out: redacting them would garble every log line.
    pub fn secret_values(&self) -> Vec<String> {
        let env = |k: &str| std::env::var(k).ok();
        // As configured; `resolvable` ones may name an environment variable.
        let mut configured: Vec<&SecretString> = Vec::new();
        let mut resolvable: Vec<&SecretString> = Vec::new();
        for p in &self.model_providers {
            resolvable.extend(&p.api_key);
        }
        for p in &self.mcp_providers {
            resolvable.extend(&p.api_key);
            configured.extend(p.headers.values());
            configured.extend(p.env.values());
            if let Some(o) = &p.oauth {
                resolvable.extend(&o.client_secret);
                resolvable.extend(&o.private_key);
            }
        }
        for t in &self.tools {
            configured.extend(t.headers.values());
        }
        for k in &self.auth.api_keys {
            configured.extend(&k.key);
        }
        configured.extend(&self.server.metrics_token);
        configured.extend(&self.database.url);
        configured.extend(&self.datasets.hf.token);
        configured.extend(self.otel.headers.values());

        let mut out: Vec<String> = configured
            .iter()
            .chain(&resolvable)
            .map(|s| s.expose_secret().to_owned())
            .collect();
        out.extend(
            resolvable
                .iter()
                .map(|s| resolve_api_key(s, env).expose_secret().to_owned()),
        );
        let env_names = self.auth.api_keys.iter().map(|k| k.key_env.as_deref());
        out.extend(
            env_names
                .chain([self.datasets.hf.token_env.as_deref()])
                .flatten()
                .filter_map(env),
        );
        // The collector's headers from the environment (an API key, typically), each value
        // as the exporter reads them: `key=value` pairs separated by commas.
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(headers) = env(var) {
                out.extend(
                    headers
                        .split(',')
                        .filter_map(|kv| kv.split_once('='))
                        .map(|(_, v)| v.trim().to_owned()),
                );
            }
        }
        // A database URL's password also appears on its own (drivers' errors quote it).
        if let Some(url) = &self.database.url
            && let Some((_, rest)) = url.expose_secret().split_once("://")
            && let Some((userinfo, _)) = rest.split_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            out.push(password.to_owned());
        }
        out.retain(|s| s.len() >= MIN_SECRET_LEN);
        out.sort();
        out.dedup();
        out
    }
}

/// Shortest value treated as a secret.
pub const MIN_SECRET_LEN: usize = 6;

/// Every form in which `secret` may appear in text that quotes it: as is; percent-encoded
/// (form encoding and RFC 3986 component encoding, upper- and lowercase hex); JSON-escaped;
/// and base64 (standard and URL-safe), as the part of any base64 text holding it that depends
/// on its bytes alone, at each of the three alignments it can have there (an echoed request
/// body or header that was base64-encoded whole). The redactors of the log, of provider errors
/// and of MCP errors all blank these, so an upstream that echoes what it was sent, in whatever
/// encoding, does not carry a secret out. Forms shorter than [`MIN_SECRET_LEN`] are left out.
pub fn secret_forms(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

    let mut out = vec![secret.to_owned()];
    let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let component: String = secret
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    for encoded in [form, component] {
        out.push(lowercase_escapes(&encoded));
        out.push(encoded);
    }
    if let Ok(json) = serde_json::to_string(secret) {
        out.push(json[1..json.len() - 1].to_owned());
    }
    let bytes = secret.as_bytes();
    for skip in 0..3.min(bytes.len()) {
        let aligned = &bytes[skip..];
        let whole = &aligned[..aligned.len() / 3 * 3];
        out.push(STANDARD_NO_PAD.encode(whole));
        out.push(URL_SAFE_NO_PAD.encode(whole));
    }
    out.retain(|f| f.len() >= MIN_SECRET_LEN);
    out.sort();
    out.dedup();
    out
}

/// `%XX` escapes with lowercase hex digits (`%2f`), as some encoders write them.
fn lowercase_escapes(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3).unwrap_or(&rest[at..]);
        out.push_str(&escape.to_ascii_lowercase());
        rest = &rest[at + escape.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    /// Each encoding an echo was seen in (round 3, Q5) hides the secret from a redactor that
    /// blanks the raw value only; with the forms, none survives.
    #[test]
    fn every_encoding_of_a_secret_is_a_form_of_it() {
        let secret = "s3cr+t/Key==with \"q\"";
        let forms = secret_forms(secret);
        let blank = |text: &str| {
            let mut out = text.to_owned();
            let mut sorted = forms.clone();
            sorted.sort_by_key(|f| std::cmp::Reverse(f.len()));
            for f in &sorted {
                out = out.replace(f.as_str(), "[x]");
            }
            out
        };
        let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let echoes = [
            format!("client_secret={form}&grant_type=client_credentials"),
            format!("client_secret={}", lowercase_escapes(&form)),
            format!(
                "{{\"client_secret\":{}}}",
                serde_json::to_string(secret).unwrap()
            ),
            format!("secret: {}", "s3cr%2Bt%2FKey%3D%3Dwith%20%22q%22"),
        ];
        for echo in &echoes {
            let cleaned = blank(echo);
            assert!(!cleaned.contains("s3cr"), "{echo} -> {cleaned}");
            assert!(
                !cleaned.to_ascii_lowercase().contains("%2bt"),
                "{echo} -> {cleaned}"
            );
        }
        // The whole echoed body, base64-encoded, at every offset the secret can sit at: the
        // characters that encode the secret's bytes alone are blanked.
        for prefix in ["", "a", "ab", "abc"] {
            for engine in [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::URL_SAFE,
            ] {
                let plain = format!("{prefix}client_secret={secret}&x=1");
                let start = plain.find(secret).unwrap();
                let end = start + secret.len();
                let body = engine.encode(&plain);
                let core = &body[start.div_ceil(3) * 4..end / 3 * 4];
                let cleaned = blank(&body);
                assert!(!cleaned.contains(core), "{prefix}: {cleaned}");
            }
        }
        assert!(secret_forms("abc").is_empty(), "too short to redact");
    }
}
