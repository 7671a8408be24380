//! Source locations.

use std::fmt;

/// A byte range in the source text an IR node came from.
///
/// Spans never take part in IR equality: two IRs that differ only in where they came
/// from are equal, which is what the printer/parser roundtrip needs.
#[derive(Clone, Copy, Default, Debug, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl PartialEq for Span {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl std::hash::Hash for Span {
    fn hash<H: std::hash::Hasher>(&self, _state: &mut H) {}
}

impl Span {
    /// A span with no source (built by a pass or by the DSL).
    pub const NONE: Span = Span { start: 0, end: 0 };

    /// Builds a span from byte offsets.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start: start as u32, end: end as u32 }
    }

    /// Whether the span points to real source text.
    pub fn is_known(&self) -> bool {
        self.end > self.start
    }
}

/// A resolved source position: 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Source text with a name, used to turn spans into `file:line:col` diagnostics.
#[derive(Clone, Debug)]
pub struct SourceFile<'a> {
    /// Name shown in diagnostics (usually the path).
    pub name: &'a str,
    /// The whole text.
    pub text: &'a str,
}

impl<'a> SourceFile<'a> {
    /// Wraps a named source text.
    pub fn new(name: &'a str, text: &'a str) -> Self {
        SourceFile { name, text }
    }

    /// Line and column of a byte offset (clamped to the text).
    pub fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = self.text[line_start..offset].chars().count() + 1;
        Location { line, col }
    }

    /// Renders a diagnostic: `file:line:col: message`, the source line and a caret.
    pub fn render(&self, span: Span, message: &str) -> String {
        if !span.is_known() && span.start == 0 {
            return format!("{}: {}", self.name, message);
        }
        let loc = self.location(span.start as usize);
        let line_text = self.text.lines().nth(loc.line - 1).unwrap_or("");
        let width = if span.end > span.start {
            let end = (span.end as usize).min(self.text.len());
            let start = (span.start as usize).min(end);
            self.text.get(start..end).map_or(1, |s| s.lines().next().map_or(1, |l| l.chars().count().max(1)))
        } else {
            1
        };
        let gutter = loc.line.to_string().len();
        format!(
            "{name}:{loc}: {message}\n{pad} |\n{line} | {text}\n{pad} | {spaces}{carets}",
            name = self.name,
            pad = " ".repeat(gutter),
            line = loc.line,
            text = line_text,
            spaces = " ".repeat(loc.col - 1),
            carets = "^".repeat(width),
        )
    }
}
