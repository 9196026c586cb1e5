//! The validator's shared plumbing: the `path: reason` collector ([`Errors`]), message texts
//! and small value checks that several kinds use (ports, protocols, enum values), reading
//! `serde_json::Value` sub-objects into private shapes, and the parsers for RE2 regexes and
//! Go durations.

use std::fmt::Display;

use regex::Regex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Collects `path: reason` messages.
#[derive(Default)]
pub(super) struct Errors(pub(super) Vec<String>);

impl Errors {
    pub(super) fn add(&mut self, path: impl Display, reason: impl Display) {
        self.0.push(format!("{path}: {reason}"));
    }

    pub(super) fn finish(self) -> Result<(), Vec<String>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }
}

pub(super) const PORT_RANGE: &str = "port must be between 1-65535";
pub(super) const UNIX_PREFIX: &str = "unix://";

/// Reads a JSON sub-object into a private shape; a type error is reported at its path.
pub(super) fn typed<T: DeserializeOwned>(
    errs: &mut Errors,
    path: &str,
    value: &Value,
) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
        Err(e) => {
            let inner = e.path().to_string();
            let at = if inner == "." {
                path.to_string()
            } else {
                format!("{path}.{inner}")
            };
            errs.add(at, e.inner());
            None
        }
    }
}

/// `null` (a YAML key with no value) reads as the default.
pub(super) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// What kind of protocol an Istio port protocol name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP, HTTP2, HTTP_PROXY, GRPC, GRPC-Web.
    Http,
    /// HTTPS, TLS.
    Tls,
    /// TCP, UDP, Mongo, Redis, MySQL.
    Other,
}

/// Istio's protocol names, matched case-insensitively (`tcp` is `TCP`). `None` if unknown.
/// The kind of an Istio port protocol name (case-insensitive); `None` for a name Istio does
/// not know (none given included: istiod's `Unsupported`, a sniffed port).
pub fn protocol(name: &str) -> Option<Protocol> {
    match name.to_ascii_lowercase().as_str() {
        "http" | "http2" | "http_proxy" | "grpc" | "grpc-web" => Some(Protocol::Http),
        "https" | "tls" => Some(Protocol::Tls),
        "tcp" | "udp" | "mongo" | "redis" | "mysql" => Some(Protocol::Other),
        _ => None,
    }
}

pub(super) fn unsupported_value(errs: &mut Errors, path: &str, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        errs.add(
            path,
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        );
    }
}

pub(super) fn port_in_range(n: i64) -> bool {
    (1..=65535).contains(&n)
}

pub(super) fn required_port(errs: &mut Errors, path: &str, port: Option<i64>) {
    match port {
        None => errs.add(path, "Required value"),
        Some(p) if !port_in_range(p) => errs.add(path, PORT_RANGE),
        Some(_) => {}
    }
}

pub(super) fn invalid_port_name(name: &str) -> String {
    format!(
        "Invalid value: {name:?}: port name must be valid (a DNS-1123 label of at most 63 characters)"
    )
}

pub(super) fn invalid_subset_name(name: &str) -> String {
    format!("subset name is invalid (must be a DNS-1123 label): {name:?}")
}

pub(super) fn non_empty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

pub(super) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

pub(super) fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex")
}

/// Rewrites the RE2 syntax (what Envoy and Istio's Go validator read) that Rust's `regex`
/// reads differently: a `{` that does not start a repetition (`{n}`, `{n,}`, `{n,m}`) is a
/// literal in RE2, and `\Q...\E` quotes a literal.
pub(super) fn re2_compat(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if !in_class && chars.get(i + 1) == Some(&'Q') => {
                let start = i + 2;
                let end = (start..chars.len())
                    .find(|&k| chars[k] == '\\' && chars.get(k + 1) == Some(&'E'))
                    .unwrap_or(chars.len());
                let literal: String = chars[start..end].iter().collect();
                out.push_str(&regex::escape(&literal));
                i = end + 2;
                continue;
            }
            '\\' => {
                out.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    out.push(next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                i += 1;
                // `[]...]` and `[^]...]` start with a literal `]`.
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push(']');
                    i += 1;
                }
                continue;
            }
            '[' if chars.get(i + 1) == Some(&':') => {
                // A POSIX class such as `[:alpha:]` inside a class.
                if let Some(end) = (i + 2..chars.len())
                    .find(|&k| chars[k] == ':' && chars.get(k + 1) == Some(&']'))
                {
                    out.extend(&chars[i..end + 2]);
                    i = end + 2;
                    continue;
                }
            }
            ']' if in_class => in_class = false,
            '{' if !in_class && !starts_repetition(&chars[i..]) => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Whether `s` (starting at a `{`) is `{n}`, `{n,}` or `{n,m}`.
fn starts_repetition(s: &[char]) -> bool {
    let digits_from = |mut j: usize| {
        while s.get(j).is_some_and(char::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let j = digits_from(1);
    if j == 1 {
        return false;
    }
    let j = if s.get(j) == Some(&',') {
        digits_from(j + 1)
    } else {
        j
    };
    s.get(j) == Some(&'}')
}

/// Parses a Go-style duration (`300s`, `1m`, `1.5h`, `8ms`, `1h2m`) into nanoseconds, as the
/// Kubernetes CEL `duration()` does. Protobuf JSON durations (`1.5s`) are a subset.
pub fn parse_duration(s: &str) -> Option<i128> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let int_value: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut value = int_value.checked_mul(scale)?;
        let mut frac_scale = scale;
        for digit in frac.bytes().take(30) {
            frac_scale /= 10;
            value += i128::from(digit - b'0') * frac_scale;
        }
        total = total.checked_add(value)?;
        rest = next;
    }
    Some(if negative { -total } else { total })
}

/// Checks a duration's syntax and, if `at_least_1ms`, Istio's rule that it is at least 1ms
/// and a whole number of milliseconds.
pub(super) fn duration(errs: &mut Errors, path: &str, s: &str, at_least_1ms: bool) {
    match parse_duration(s) {
        None => errs.add(path, format!("invalid duration {s:?}")),
        Some(_) if !at_least_1ms => {}
        Some(ns) if ns < 1_000_000 => errs.add(path, "duration must be at least 1ms"),
        Some(ns) if ns % 1_000_000 != 0 => {
            errs.add(path, "only durations to ms precision are supported")
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_re2_only_syntax() {
        assert_eq!(re2_compat(r"^/api/{version}"), r"^/api/\{version}");
        assert_eq!(
            re2_compat(r"a{2}b{1,}c{1,3}d{,3}"),
            r"a{2}b{1,}c{1,3}d\{,3}"
        );
        assert_eq!(re2_compat(r"[{}]\{x\Q.*{\E"), r"[{}]\{x\.\*\{");
        assert_eq!(
            re2_compat(r"[]{][^]{][[:alpha:]{]{"),
            r"[]{][^]{][[:alpha:]{]\{"
        );
        for re2 in [r"a{", r"}{", r"\Qa.b", r"x{1000}", r"(?i)jas.n"] {
            assert!(Regex::new(&re2_compat(re2)).is_ok(), "{re2}");
        }
        assert!(Regex::new(&re2_compat(r"(unclosed")).is_err());
    }

    #[test]
    fn parses_go_durations() {
        let second = 1_000_000_000;
        for (text, ns) in [
            ("300s", 300 * second),
            ("1m", 60 * second),
            ("8ms", 8_000_000),
            ("1.5s", 1_500_000_000),
            ("1h2m", 3_720 * second),
            ("0", 0),
            ("0s", 0),
            ("-1s", -second),
            ("2us", 2_000),
            (".5s", 500_000_000),
        ] {
            assert_eq!(parse_duration(text), Some(ns), "{text}");
        }
        for text in ["", "5", "1d", "s", "1..5s", "abc", "1s2"] {
            assert_eq!(parse_duration(text), None, "{text}");
        }
    }
}
