//! Errors of the reader: what went wrong, and where in the script.

use fusebench_ir::IrError;
use std::fmt;
use thiserror::Error;

/// A byte range of the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// What is wrong, without the location.
#[derive(Error, Debug, Clone, PartialEq)]
pub enum ErrorKind {
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    #[error("unknown op fd.ops.{name}; supported: {}", .supported.join(", "))]
    UnknownOp {
        name: String,
        supported: Vec<&'static str>,
    },
    #[error("unknown keyword argument `{keyword}` for {callee}; supported: {}", list_or_none(.supported))]
    UnknownKeyword {
        callee: String,
        keyword: String,
        supported: Vec<String>,
    },
    #[error("unknown dtype {written}; supported: {}", .supported.join(", "))]
    UnknownDType {
        written: String,
        supported: Vec<String>,
    },
    #[error("`{name}` is not defined")]
    UndefinedName { name: String },
    /// The fusion IR rejected a definition or op; the location is the statement's.
    #[error("{0}")]
    Ir(IrError),
    /// Well-formed text that means something fusebench does not accept.
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read the file: {0}")]
    Io(String),
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// An error located in a script: `path:line:col: message`, then the source
/// line with the offending text underlined.
#[derive(Error, Debug, Clone, PartialEq)]
#[error("{}", render(self))]
pub struct ParseError {
    /// The path as given to the reader.
    pub path: String,
    /// 1-based; 0 when the error has no location (the file could not be read).
    pub line: usize,
    /// 1-based, counted in characters.
    pub col: usize,
    /// The whole source line the error points into.
    pub source_line: String,
    /// The offending source text; empty at the end of the file.
    pub text: String,
    pub kind: ErrorKind,
}

impl ParseError {
    /// `path:line:col: message`, without the source excerpt.
    pub fn headline(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.path, self.kind)
        } else {
            format!("{}:{}:{}: {}", self.path, self.line, self.col, self.kind)
        }
    }
}

/// Characters of the source line shown around the error: a line of a
/// generated script can be megabytes long.
const SHOWN: usize = 120;

/// At most `n` characters of `s`, with "…" where it was cut.
pub(crate) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn render(e: &ParseError) -> String {
    let mut s = e.headline();
    if e.line == 0 {
        return s;
    }
    let num = e.line.to_string();
    let pad = " ".repeat(num.len());
    // The window of the line shown: from a third of it before the error.
    let chars: Vec<char> = e.source_line.chars().collect();
    let at = (e.col - 1).min(chars.len());
    let from = if chars.len() <= SHOWN { 0 } else { at.saturating_sub(SHOWN / 3) };
    let to = chars.len().min(from + SHOWN);
    let (before, after) = (if from > 0 { "…" } else { "" }, if to < chars.len() { "…" } else { "" });
    let shown: String = chars[from..to].iter().collect();
    // Tabs stay tabs under the line so the caret lines up however they render.
    let lead: String = before
        .chars()
        .map(|_| ' ')
        .chain(chars[from..at].iter().map(|&c| if c == '\t' { '\t' } else { ' ' }))
        .collect();
    let rest = to.saturating_sub(at);
    let width = e
        .text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .count()
        .min(rest)
        .max(1);
    let _ = fmt::Write::write_fmt(
        &mut s,
        format_args!(
            "\n{pad} |\n{num} | {before}{shown}{after}\n{pad} | {lead}{}",
            "^".repeat(width)
        ),
    );
    s
}

/// An error before it is given a location in lines and columns.
#[derive(Debug, Clone)]
pub(crate) struct Diag {
    pub span: Span,
    pub kind: ErrorKind,
}

pub(crate) type PResult<T> = Result<T, Diag>;

pub(crate) fn diag(span: Span, kind: ErrorKind) -> Diag {
    Diag { span, kind }
}

pub(crate) fn invalid(span: Span, msg: impl Into<String>) -> Diag {
    Diag {
        span,
        kind: ErrorKind::Invalid(msg.into()),
    }
}

pub(crate) fn expected(span: Span, expected: impl Into<String>, found: impl Into<String>) -> Diag {
    Diag {
        span,
        kind: ErrorKind::Expected {
            expected: expected.into(),
            found: clip(&found.into(), SHOWN),
        },
    }
}

/// The script's text with its line structure, to turn byte offsets into
/// lines and columns.
pub(crate) struct Source<'a> {
    pub path: &'a str,
    pub text: &'a str,
    /// Byte offset where each line starts; `\n`, `\r\n` and a lone `\r` end a line, as in Python.
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    pub fn new(path: &'a str, text: &'a str) -> Source<'a> {
        let b = text.as_bytes();
        let mut line_starts = vec![0];
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\n' => line_starts.push(i + 1),
                b'\r' if b.get(i + 1) == Some(&b'\n') => {
                    line_starts.push(i + 2);
                    i += 1;
                }
                b'\r' => line_starts.push(i + 1),
                _ => {}
            }
            i += 1;
        }
        Source {
            path,
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, off: usize) -> (usize, usize) {
        let off = off.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= off) - 1;
        let start = self.line_starts[line];
        let col = self
            .text
            .get(start..off)
            .map_or(off - start, |t| t.chars().count())
            + 1;
        (line + 1, col)
    }

    /// The text of a 1-based line, without its line break.
    pub fn line_text(&self, line: usize) -> &'a str {
        let start = self.line_starts[line - 1];
        let end = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    pub fn slice(&self, span: Span) -> &'a str {
        self.text
            .get(span.start.min(self.text.len())..span.end.min(self.text.len()))
            .unwrap_or("")
    }

    /// `"L:C"` of an offset, for messages that mention a second place.
    pub fn at(&self, off: usize) -> String {
        let (l, c) = self.line_col(off);
        format!("{l}:{c}")
    }

    pub fn error(&self, d: Diag) -> ParseError {
        let (line, col) = self.line_col(d.span.start);
        ParseError {
            path: self.path.to_string(),
            line,
            col,
            source_line: self.line_text(line).to_string(),
            text: self.slice(d.span).to_string(),
            kind: d.kind,
        }
    }
}
