//! Splits a script into logical lines of tokens, the way Python does: line
//! breaks inside brackets and after a backslash do not end a line, `#` starts
//! a comment, and each line keeps its indentation for the parser to check.

use crate::error::{diag, invalid, ErrorKind, PResult, Source, Span};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// Identifiers and keywords alike; the parser tells them apart.
    Name(String),
    /// The magnitude of an integer literal; a sign is a separate token.
    Int(u128),
    Float(f64),
    /// An imaginary literal (`2.5j`): Python's complex constants.
    Imag(f64),
    Str(String),
    Punct(&'static str),
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// One logical line: never empty.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    /// The whitespace before the first token, as written.
    pub indent: String,
    pub tokens: Vec<Token>,
    /// Where the line ends (its line break, or the end of the file).
    pub end: usize,
}

impl Line {
    pub fn start(&self) -> usize {
        self.tokens[0].span.start
    }
}

pub(crate) struct Lexed {
    /// The comment lines before the first line of code, `#` and one space removed.
    pub header: Vec<String>,
    pub lines: Vec<Line>,
}

/// Longest first, so that `->` is not read as `-` `>`.
const PUNCT: &[&str] = &[
    "**", "//", "==", "!=", "<=", ">=", "->", "(", ")", "[", "]", "{", "}", ",", ":", ".", ";",
    "=", "+", "-", "*", "/", "%", "<", ">", "@", "~", "&", "|", "^",
];

pub(crate) fn lex(src: &Source) -> PResult<Lexed> {
    Lexer {
        src,
        text: src.text,
        pos: 0,
        header: vec![],
        lines: vec![],
        brackets: vec![],
    }
    .run()
}

struct Lexer<'a, 'b> {
    src: &'b Source<'a>,
    text: &'a str,
    pos: usize,
    header: Vec<String>,
    lines: Vec<Line>,
    /// Open brackets: the character and where it is.
    brackets: Vec<(char, Span)>,
}

impl Lexer<'_, '_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.text[self.pos..].chars();
        it.next();
        it.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// Consumes a line break if one is next.
    fn eat_newline(&mut self) -> bool {
        match self.peek() {
            Some('\n') => {
                self.pos += 1;
                true
            }
            Some('\r') => {
                self.pos += 1;
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
                true
            }
            _ => false,
        }
    }

    /// The text of a comment starting at `#`, up to the line break.
    fn comment(&mut self) -> String {
        self.bump();
        let start = self.pos;
        while !matches!(self.peek(), None | Some('\n') | Some('\r')) {
            self.bump();
        }
        self.text[start..self.pos].to_string()
    }

    fn run(mut self) -> PResult<Lexed> {
        if self.text.starts_with('\u{feff}') {
            self.pos = '\u{feff}'.len_utf8();
        }
        loop {
            // Start of a physical line outside brackets: measure indentation.
            let indent_start = self.pos;
            while matches!(self.peek(), Some(' ') | Some('\t') | Some('\x0c')) {
                self.bump();
            }
            let indent = self.text[indent_start..self.pos].to_string();
            match self.peek() {
                None => break,
                Some('#') => {
                    let c = self.comment();
                    if self.lines.is_empty() {
                        self.header
                            .push(c.strip_prefix(' ').unwrap_or(&c).to_string());
                    }
                    self.eat_newline();
                    continue;
                }
                Some('\n') | Some('\r') => {
                    self.eat_newline();
                    continue;
                }
                _ => {}
            }
            // A backslash continuation can leave a line with no tokens at all.
            if let Some(line) = self.logical_line(indent)? {
                self.lines.push(line);
            }
        }
        Ok(Lexed {
            header: self.header,
            lines: self.lines,
        })
    }

    /// Tokens up to the end of the logical line, if it has any.
    fn logical_line(&mut self, indent: String) -> PResult<Option<Line>> {
        let mut tokens = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                if let Some(&(b, span)) = self.brackets.last() {
                    return Err(invalid(
                        span,
                        format!("`{b}` is never closed: the file ends before its closing bracket"),
                    ));
                }
                return Ok((!tokens.is_empty()).then_some(Line {
                    indent,
                    tokens,
                    end: self.pos,
                }));
            };
            let start = self.pos;
            match c {
                ' ' | '\t' | '\x0c' => {
                    self.bump();
                }
                '#' => {
                    self.comment();
                }
                '\n' | '\r' => {
                    let end = self.pos;
                    self.eat_newline();
                    if self.brackets.is_empty() {
                        return Ok((!tokens.is_empty()).then_some(Line {
                            indent,
                            tokens,
                            end,
                        }));
                    }
                }
                '\\' => {
                    self.bump();
                    if !self.eat_newline() {
                        return Err(invalid(
                            Span::new(start, self.pos),
                            "a backslash must end the line (line continuation)",
                        ));
                    }
                }
                '0'..='9' => tokens.push(self.number()?),
                '.' if self.peek2().is_some_and(|d| d.is_ascii_digit()) => {
                    tokens.push(self.number()?)
                }
                '\'' | '"' => tokens.push(self.string()?),
                c if c == '_' || c.is_alphabetic() => {
                    while self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
                        self.bump();
                    }
                    let name = &self.text[start..self.pos];
                    if matches!(self.peek(), Some('\'') | Some('"')) {
                        return Err(invalid(
                            Span::new(start, self.pos + 1),
                            format!("string prefixes like `{name}\"...\"` are not supported"),
                        ));
                    }
                    tokens.push(Token {
                        tok: Tok::Name(name.to_string()),
                        span: Span::new(start, self.pos),
                    });
                }
                _ => {
                    let Some(&p) = PUNCT
                        .iter()
                        .find(|p| self.text[self.pos..].starts_with(**p))
                    else {
                        self.bump();
                        return Err(invalid(
                            Span::new(start, self.pos),
                            format!("unexpected character {c:?}"),
                        ));
                    };
                    self.pos += p.len();
                    let span = Span::new(start, self.pos);
                    self.bracket(p, span)?;
                    tokens.push(Token {
                        tok: Tok::Punct(p),
                        span,
                    });
                }
            }
        }
    }

    fn bracket(&mut self, p: &str, span: Span) -> PResult<()> {
        let c = p.chars().next().unwrap_or(' ');
        match c {
            '(' | '[' | '{' => self.brackets.push((c, span)),
            ')' | ']' | '}' => {
                let open = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match self.brackets.pop() {
                    None => {
                        return Err(invalid(
                            span,
                            format!("unmatched `{c}`: no bracket is open here"),
                        ))
                    }
                    Some((b, at)) if b != open => {
                        return Err(invalid(
                            span,
                            format!(
                                "`{c}` does not match `{b}` opened at {}",
                                self.src.at(at.start)
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn digits(&mut self, ok: fn(char) -> bool) {
        // Python allows one underscore between digits.
        while let Some(c) = self.peek() {
            if ok(c) || (c == '_' && self.peek2().is_some_and(ok)) {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn number(&mut self) -> PResult<Token> {
        let start = self.pos;
        let radix = if self.peek() == Some('0') {
            match self.peek2() {
                Some('x') | Some('X') => 16,
                Some('o') | Some('O') => 8,
                Some('b') | Some('B') => 2,
                _ => 10,
            }
        } else {
            10
        };
        let mut is_float = false;
        if radix != 10 {
            self.pos += 2;
            let ok: fn(char) -> bool = match radix {
                16 => |c| c.is_ascii_hexdigit(),
                8 => |c| ('0'..='7').contains(&c),
                _ => |c| c == '0' || c == '1',
            };
            if self.peek() == Some('_') {
                self.bump();
            }
            self.digits(ok);
        } else {
            self.digits(|c| c.is_ascii_digit());
            if self.peek() == Some('.') {
                is_float = true;
                self.bump();
                self.digits(|c| c.is_ascii_digit());
            }
            if matches!(self.peek(), Some('e') | Some('E')) {
                let save = self.pos;
                self.bump();
                if matches!(self.peek(), Some('+') | Some('-')) {
                    self.bump();
                }
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    is_float = true;
                    self.digits(|c| c.is_ascii_digit());
                } else {
                    self.pos = save;
                }
            }
        }
        // `2.5j`: an imaginary literal (decimal only, as in Python).
        let alnum = |c: Option<char>| c.is_some_and(|c| c == '_' || c.is_alphanumeric());
        if radix == 10 && matches!(self.peek(), Some('j') | Some('J')) && !alnum(self.peek2()) {
            let clean: String = self.text[start..self.pos].chars().filter(|&c| c != '_').collect();
            self.bump();
            let span = Span::new(start, self.pos);
            let v: f64 = clean
                .parse()
                .map_err(|_| invalid(span, format!("invalid number literal `{}`", &self.text[start..self.pos])))?;
            return Ok(Token { tok: Tok::Imag(v), span });
        }
        // `1abc`, `0x`, `1e`, `3jk`: one malformed token rather than two.
        while self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
            self.bump();
        }
        let span = Span::new(start, self.pos);
        let text = &self.text[start..self.pos];
        let bad = || invalid(span, format!("invalid number literal `{text}`"));
        let clean: String = text.chars().filter(|&c| c != '_').collect();
        if is_float {
            let v: f64 = clean.parse().map_err(|_| bad())?;
            return Ok(Token {
                tok: Tok::Float(v),
                span,
            });
        }
        let body = if radix == 10 { &clean[..] } else { &clean[2..] };
        if body.is_empty() {
            return Err(bad());
        }
        match u128::from_str_radix(body, radix) {
            Ok(v) => Ok(Token {
                tok: Tok::Int(v),
                span,
            }),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(diag(
                span,
                ErrorKind::Invalid(format!("integer literal `{text}` is too large")),
            )),
            Err(_) => Err(bad()),
        }
    }

    fn string(&mut self) -> PResult<Token> {
        let start = self.pos;
        let q = self.bump().unwrap_or('"');
        let triple: String = [q, q, q].iter().collect();
        if self.text[start..].starts_with(&triple) {
            return Err(invalid(
                Span::new(start, start + 3),
                "triple-quoted strings are not supported",
            ));
        }
        let mut s = String::new();
        loop {
            match self.peek() {
                None | Some('\n') | Some('\r') => {
                    return Err(invalid(
                        Span::new(start, self.pos),
                        "unterminated string: the line ends before its closing quote",
                    ))
                }
                Some('\\') => {
                    self.bump();
                    match self.peek() {
                        None | Some('\n') | Some('\r') => {
                            return Err(invalid(
                                Span::new(start, self.pos),
                                "unterminated string: the line ends before its closing quote",
                            ))
                        }
                        Some(c) => {
                            self.bump();
                            match c {
                                'n' => s.push('\n'),
                                't' => s.push('\t'),
                                '\\' | '\'' | '"' => s.push(c),
                                other => {
                                    s.push('\\');
                                    s.push(other);
                                }
                            }
                        }
                    }
                }
                Some(c) if c == q => {
                    self.bump();
                    return Ok(Token {
                        tok: Tok::Str(s),
                        span: Span::new(start, self.pos),
                    });
                }
                Some(c) => {
                    self.bump();
                    s.push(c);
                }
            }
        }
    }
}
