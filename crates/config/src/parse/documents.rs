//! A file's text as documents: split at `---` lines before any YAML is parsed, each read
//! into a value (with go-yaml's leniency for flow sequences), the parser's lines made lines
//! of the file, and the lines of a document's fields found when an error or a note needs them.

use super::{DocError, DocOutcome};
use crate::yaml_lines::FieldLines;

/// Splits at lines that are exactly a document marker (`---`, optionally followed by
/// content or a comment, or `...`). Returns each document's first line and text.
pub(super) fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let is_start = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        let is_end = line == "..." || line.starts_with("... ");
        if is_start || is_end {
            if !current.trim().is_empty() || !docs.is_empty() || i > 0 {
                docs.push((start, std::mem::take(&mut current)));
            }
            start = i + 2;
            if is_start {
                // `--- key: value` puts content on the marker line itself.
                let rest = line[3..].trim_start();
                if !rest.is_empty() && !rest.starts_with('#') {
                    current.push_str(rest);
                    current.push('\n');
                    start = i + 1;
                }
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    docs.push((start, current));
    // Markers at the very top or bottom of a file make empty documents that users never
    // meant; keep numbering stable by dropping only those with no content at all.
    docs.retain(|(_, body)| !body.trim().is_empty() || has_comment_only(body));
    docs
}

fn has_comment_only(body: &str) -> bool {
    body.lines().any(|l| l.trim_start().starts_with('#'))
}

/// Rewrites the parser's `line N` (counted from the document's start) as a line of the file.
pub(super) fn file_lines(message: &str, first_line: usize) -> String {
    static LINE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"line (\d+)").expect("valid regex"));
    LINE.replace_all(message, |c: &regex::Captures| {
        let n: usize = c[1].parse().unwrap_or(1);
        format!("line {}", n + first_line - 1)
    })
    .into_owned()
}

/// Kubernetes reads YAML with go-yaml, which takes a plain scalar such as `001:db8::` in a
/// one-line flow sequence (`[1.2.3.4, 001:db8::]`) as a string; libyaml stops at the `:`
/// before `]`. Only for a document that failed to parse, this quotes such items and returns
/// the text to try again (`None` when there is nothing to quote).
pub(super) fn go_yaml_flow_compat(body: &str) -> Option<String> {
    let mut changed = false;
    let lines: Vec<String> = body
        .lines()
        .map(|line| {
            let (Some(open), Some(close)) = (line.find('['), line.rfind(']')) else {
                return line.to_string();
            };
            if close < open {
                return line.to_string();
            }
            let inner = &line[open + 1..close];
            if inner.contains(['[', ']', '{', '}', '"', '\'']) {
                return line.to_string();
            }
            let items: Vec<String> = inner
                .split(',')
                .map(|item| {
                    let t = item.trim();
                    if t.contains(':') && !t.contains(": ") {
                        changed = true;
                        format!("\"{t}\"")
                    } else {
                        t.to_string()
                    }
                })
                .collect();
            format!(
                "{}[{}]{}",
                &line[..open],
                items.join(", "),
                &line[close + 1..]
            )
        })
        .collect();
    changed.then(|| lines.join("\n"))
}

/// A document's YAML as a value; an empty document or one that does not parse is its
/// outcome already.
pub(super) fn read_document(
    body: &str,
    first_line: usize,
) -> Result<serde_json::Value, DocOutcome> {
    let value: serde_json::Value = match serde_norway::from_str(body) {
        Ok(v) => v,
        Err(e) => match go_yaml_flow_compat(body).and_then(|b| serde_norway::from_str(&b).ok()) {
            Some(v) => v,
            None => {
                return Err(DocOutcome::Invalid(DocError::Yaml(file_lines(
                    &e.to_string(),
                    first_line,
                ))));
            }
        },
    };
    if value.is_null() {
        return Err(DocOutcome::Empty);
    }
    Ok(value)
}

/// The lines of one document's fields, as lines of its file, read only when asked.
pub(super) struct Lines<'a> {
    body: &'a str,
    /// The file's line of the document's first.
    first: usize,
    read: std::cell::OnceCell<FieldLines>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(body: &'a str, first: usize) -> Self {
        Lines {
            body,
            first,
            read: std::cell::OnceCell::new(),
        }
    }

    /// The file's line of `path` (or of its nearest enclosing field that has one).
    pub(super) fn field(&self, path: &str) -> Option<usize> {
        let lines = self.read.get_or_init(|| FieldLines::read(self.body));
        lines.line_of(path).map(|rel| self.first + rel.max(1) - 1)
    }

    /// The file's line of the field a `path: reason` message is about.
    pub(super) fn message(&self, prefix: &str, message: &str) -> Option<usize> {
        let (path, _) = message.split_once(": ")?;
        self.field(&format!("{prefix}{path}"))
    }
}
