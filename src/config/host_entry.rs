//! `server.allowed_hosts` entries: parsed here, where the config is checked, and matched
//! against each request's `Host` by the API's host guard.

/// One allowed host name, with or without a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// Lower-cased; an IPv6 address keeps its brackets.
    pub host: String,
    pub port: Option<u16>,
}

impl HostEntry {
    /// `name`, `name:port`, `[v6]` or `[v6]:port`, lower-cased; `None` when malformed.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().to_ascii_lowercase();
        let (host, port) = if text.starts_with('[') {
            let end = text.find(']')?;
            let (host, rest) = text.split_at(end + 1);
            match rest.strip_prefix(':') {
                Some(port) => (host.to_owned(), Some(port.parse().ok()?)),
                None if rest.is_empty() => (host.to_owned(), None),
                None => return None,
            }
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port.parse().ok()?)),
                None => (text.clone(), None),
            }
        };
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
        valid.then_some(Self { host, port })
    }
}
