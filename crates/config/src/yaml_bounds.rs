//! Bounds on a YAML document, checked before the YAML parser builds anything from it: the
//! nesting depth (found by a linear scan of the text, because deep flow nesting makes a
//! libyaml-style scanner quadratic) and the size of the document once its aliases are
//! expanded (a few aliases of a large anchor, or aliases of aliases, can turn a small file
//! into gigabytes; Kubernetes' YAML decoder bounds the same thing).

use std::cell::Cell;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The bounds of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YamlBounds {
    /// Deepest nesting of collections, block and flow together.
    pub max_depth: usize,
    /// Largest size of the document with its aliases expanded, in bytes of scalars (and one
    /// per node).
    pub max_expanded_bytes: u64,
}

impl Default for YamlBounds {
    fn default() -> Self {
        YamlBounds {
            max_depth: 64,
            max_expanded_bytes: 4 << 20,
        }
    }
}

/// Why a document is out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    #[error("nested deeper than {max} levels at line {line} (max_yaml_depth)")]
    TooDeep { max: usize, line: usize },
    #[error("its aliases expand past {max} bytes (max_file_bytes)")]
    ExpandsTooFar { max: u64 },
}

impl YamlBounds {
    /// Checks `body` (one document); `Err` names the bound and, for depth, the line (counted
    /// from the document's first line, 1-based).
    pub fn check(&self, body: &str) -> Result<(), BoundsError> {
        if let Some(line) = depth_exceeded(body, self.max_depth) {
            return Err(BoundsError::TooDeep {
                max: self.max_depth,
                line,
            });
        }
        // Without an anchor there is nothing to expand: the common case costs one scan.
        if body.contains('&') && body.contains('*') && expands_past(body, self.max_expanded_bytes) {
            return Err(BoundsError::ExpandsTooFar {
                max: self.max_expanded_bytes,
            });
        }
        Ok(())
    }
}

/// The line (1-based) where the nesting of `body` first passes `max`, if it does. A linear,
/// conservative reading of YAML's structure: block levels from indentation and `- `
/// indicators, flow levels from brackets outside quotes, comments and block scalars.
fn depth_exceeded(body: &str, max: usize) -> Option<usize> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    // Inside a quoted scalar that spans lines: its quote character.
    let mut quote: Option<u8> = None;
    // Inside a block scalar: lines indented more than this are its content.
    let mut block_scalar: Option<usize> = None;
    for (n, line) in body.lines().enumerate() {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|b| **b == b' ').count();
        let blank = indent == bytes.len() || bytes[indent] == b'#';
        if let Some(parent) = block_scalar {
            if blank || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        if blank && quote.is_none() {
            continue;
        }
        let mut i = indent;
        if quote.is_none() && flow == 0 {
            // Block structure: the levels of this line are its indentation, then one per
            // `- ` sequence indicator.
            while indents.last().is_some_and(|top| *top >= indent) {
                indents.pop();
            }
            indents.push(indent);
            while i < bytes.len() && bytes[i] == b'-' && bytes.get(i + 1).is_none_or(|b| *b == b' ')
            {
                i += 1;
                while i < bytes.len() && bytes[i] == b' ' {
                    i += 1;
                }
                indents.push(i);
            }
            if indents.len() > max {
                return Some(n + 1);
            }
        }
        let mut token_start = true;
        while i < bytes.len() {
            let b = bytes[i];
            if let Some(q) = quote {
                if b == b'\\' && q == b'"' {
                    i += 2;
                    continue;
                }
                if b == q {
                    if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    quote = None;
                    token_start = false;
                }
                i += 1;
                continue;
            }
            match b {
                b'#' if token_start || bytes[i - 1] == b' ' => break,
                b'"' | b'\'' if token_start => quote = Some(b),
                b'[' | b'{' if token_start || flow > 0 => {
                    flow += 1;
                    if indents.len() + flow > max {
                        return Some(n + 1);
                    }
                    token_start = true;
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    token_start = false;
                }
                b',' if flow > 0 => token_start = true,
                b':' if bytes.get(i + 1).is_none_or(|c| *c == b' ') || flow > 0 => {
                    token_start = true;
                }
                b'|' | b'>' if token_start && flow == 0 => {
                    // Its content is indented more than the node that holds it.
                    block_scalar = Some(indents.last().copied().unwrap_or(0));
                    break;
                }
                b' ' | b'\t' => {}
                _ => token_start = false,
            }
            i += 1;
        }
    }
    None
}

/// Whether `body`, with its aliases expanded, is larger than `max` bytes. The parser replays
/// an anchor's events for each alias; this counts them as they come, without building
/// anything, and stops as soon as the count passes `max`.
fn expands_past(body: &str, max: u64) -> bool {
    let probe = SizeProbe {
        total: Cell::new(0),
        max,
    };
    for document in serde_norway::Deserializer::from_str(body) {
        // A document the parser rejects for another reason is reported by the real parse;
        // the parser's iterator repeats its error for ever, so stop at the first one.
        if (&probe).deserialize(document).is_err() {
            break;
        }
    }
    probe.total.get() > max
}

struct SizeProbe {
    total: Cell<u64>,
    max: u64,
}

impl SizeProbe {
    fn add<E: serde::de::Error>(&self, n: u64) -> Result<(), E> {
        let total = self.total.get().saturating_add(n);
        self.total.set(total);
        if total > self.max {
            return Err(E::custom("expanded past the bound"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &SizeProbe {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &SizeProbe {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.add(1)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.add(1)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.add(1)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.add(1)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(), E> {
        self.add(s.len() as u64 + 1)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.add(1)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.add(1)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.add(1)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.add(1)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_depth: usize, max_expanded_bytes: u64) -> YamlBounds {
        YamlBounds {
            max_depth,
            max_expanded_bytes,
        }
    }

    #[test]
    fn istio_yaml_is_within_bounds() {
        let vs = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: a # [x\nspec:\n  hosts: [\"*.a\", b]\n  http:\n  - match:\n    - uri: {regex: \"^/[a-z]{3}\"}\n      headers:\n        x: {prefix: '[it''s'}\n    route:\n    - destination: {host: a, port: {number: 80}}\n      weight: 100\n  - name: it's [plain\n    route: [{destination: {host: b}}]\n";
        assert_eq!(YamlBounds::default().check(vs), Ok(()));
        // Counted 6 at the deepest (`destination: {.. port: {..}}` under `route:`).
        assert_eq!(bounds(6, 1 << 20).check(vs), Ok(()));
        assert!(bounds(5, 1 << 20).check(vs).is_err());
    }

    #[test]
    fn deep_flow_nesting_is_rejected_in_linear_time() {
        let deep = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        assert_eq!(
            YamlBounds::default().check(&deep),
            Err(BoundsError::TooDeep { max: 64, line: 1 })
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let mapping = format!("{}\n", "{a: ".repeat(70));
        assert!(YamlBounds::default().check(&mapping).is_err());
    }

    #[test]
    fn deep_block_nesting_is_rejected_with_its_line() {
        let mut doc = String::new();
        for level in 0..70 {
            doc.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
        }
        assert_eq!(
            YamlBounds::default().check(&doc),
            Err(BoundsError::TooDeep { max: 64, line: 65 })
        );
        let dashes = format!("{}x\n", "- ".repeat(70));
        assert!(YamlBounds::default().check(&dashes).is_err());
    }

    #[test]
    fn brackets_in_quotes_comments_and_block_scalars_do_not_nest() {
        let doc = format!(
            "a: \"{open}\"\nb: '{open}'\nc: x # {open}\nd: |\n  {open}\n  {open}\ne: \"multi\n  {open}\"\nf: [1, 2]\n",
            open = "[".repeat(100)
        );
        assert_eq!(YamlBounds::default().check(&doc), Ok(()));
    }

    #[test]
    fn a_document_the_parser_rejects_ends_the_alias_probe() {
        // Found by the yaml fuzz target: the parser's iterator repeated its error, and the
        // probe looped for ever on an invalid document with an anchor and an alias.
        let invalid = "a: &x [1\nb: *x\n  c: {\n";
        let started = std::time::Instant::now();
        assert_eq!(YamlBounds::default().check(invalid), Ok(()));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn alias_expansion_is_bounded() {
        let big = "x".repeat(10_000);
        let mut doc = format!("a: &big {big}\nb: [");
        for _ in 0..1000 {
            doc.push_str("*big, ");
        }
        doc.push_str("]\n");
        assert_eq!(
            YamlBounds::default().check(&doc),
            Err(BoundsError::ExpandsTooFar { max: 4 << 20 })
        );
        // A few aliases of a small anchor are fine.
        let small = "a: &p {number: 80}\nb: *p\nc: *p\n";
        assert_eq!(YamlBounds::default().check(small), Ok(()));
    }
}
