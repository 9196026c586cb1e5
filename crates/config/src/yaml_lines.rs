//! Where a field is in a YAML document: the 1-based line of each field path
//! (`spec.http[0].match[1].method`), read from the parser's events, so that an error or a note
//! about a field names its own line, not the document's first.
//!
//! Paths are written as the schema check and the validator write them: `.key` for a mapping
//! key, `[i]` for a sequence item; a validator's `[key]` for a map entry is read as `.key`.
//! Anything under an alias has no line of its own (the alias's is used).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// The lines of one document's field paths.
#[derive(Debug, Default)]
pub struct FieldLines {
    lines: HashMap<String, usize>,
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

impl FieldLines {
    /// Reads `doc` (one document). A document the parser rejects has no lines: the caller
    /// falls back to the document's first line.
    pub fn read(doc: &str) -> FieldLines {
        let mut lines = HashMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        for event in Parser::new_from_str(doc) {
            let Ok((event, span)) = event else {
                break;
            };
            let line = span.start.line();
            match event {
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = value_path(&mut stack, line, &mut lines);
                    stack.push(match event {
                        Event::MappingStart(..) => Frame::Map { path, key: None },
                        _ => Frame::Seq { path, next: 0 },
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    value_done(&mut stack);
                }
                Event::Scalar(text, ..) => {
                    if let Some(Frame::Map {
                        path,
                        key: key @ None,
                    }) = stack.last_mut()
                    {
                        let here = join(path, &text);
                        lines.entry(here).or_insert(line);
                        *key = Some(text.into_owned());
                    } else {
                        value_path(&mut stack, line, &mut lines);
                        value_done(&mut stack);
                    }
                }
                Event::Alias(_) => {
                    value_path(&mut stack, line, &mut lines);
                    value_done(&mut stack);
                }
                _ => {}
            }
        }
        FieldLines { lines }
    }

    /// The line of `path`, or of its nearest enclosing field that has one.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut path = normalize(path);
        loop {
            if let Some(line) = self.lines.get(&path) {
                return Some(*line);
            }
            let cut = path.rfind(['.', '['])?;
            path.truncate(cut);
        }
    }

    /// The line of the field a `path: reason` message is about.
    pub fn line_of_message(&self, message: &str) -> Option<usize> {
        let (path, _) = message.split_once(": ")?;
        self.line_of(path)
    }
}

/// The path of the value that starts now (recording its line when it is a sequence item).
fn value_path(stack: &mut [Frame], line: usize, lines: &mut HashMap<String, usize>) -> String {
    match stack.last() {
        None => String::new(),
        Some(Frame::Map { path, key }) => join(path, key.as_deref().unwrap_or("?")),
        Some(Frame::Seq { path, next }) => {
            let here = format!("{path}[{next}]");
            lines.entry(here.clone()).or_insert(line);
            here
        }
    }
}

/// A value of the innermost container is complete.
fn value_done(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Map { key, .. }) => *key = None,
        Some(Frame::Seq { next, .. }) => *next += 1,
        None => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `a[key].b` → `a.key.b` (numeric indexes stay).
fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let inner = &rest[open + 1..close];
        if inner.bytes().all(|b| b.is_ascii_digit()) && !inner.is_empty() {
            out.push_str(&rest[open..=close]);
        } else {
            out.push('.');
            out.push_str(inner);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r}
spec:
  hosts: [a.example.com]
  http:
  - match:
    - uri: {prefix: /a}
    - method:
        exact: POST
    route:
    - destination: {host: a}
  - retries: {attempts: 3}
";

    #[test]
    fn each_field_path_has_its_line() {
        let lines = FieldLines::read(DOC);
        assert_eq!(lines.line_of("spec"), Some(4));
        assert_eq!(lines.line_of("spec.hosts[0]"), Some(5));
        assert_eq!(lines.line_of("spec.http[0].match[0].uri.prefix"), Some(8));
        assert_eq!(lines.line_of("spec.http[0].match[1].method"), Some(9));
        assert_eq!(
            lines.line_of("spec.http[0].match[1].method.exact"),
            Some(10)
        );
        assert_eq!(
            lines.line_of("spec.http[0].route[0].destination.host"),
            Some(12)
        );
        assert_eq!(lines.line_of("spec.http[1].retries"), Some(13));
        assert_eq!(lines.line_of("spec.http[1].retries.attempts"), Some(13));
        // A path with no line of its own falls back to its nearest field.
        assert_eq!(
            lines.line_of("spec.http[1].retries.perTryTimeout"),
            Some(13)
        );
        assert_eq!(
            lines.line_of_message("spec.http[0].match[1].method.exact: bad"),
            Some(10)
        );
        assert_eq!(lines.line_of("nothing.here"), None);
    }

    #[test]
    fn validator_map_keys_in_brackets_are_found() {
        let lines = FieldLines::read("spec:\n  ports:\n    http:\n      number: 0\n");
        assert_eq!(lines.line_of("spec.ports[http].number"), Some(4));
    }

    #[test]
    fn a_broken_document_has_no_lines_and_no_panic() {
        let lines = FieldLines::read("spec: [a, {b: ]\n");
        assert_eq!(lines.line_of("spec.x"), lines.line_of("spec"));
    }
}
