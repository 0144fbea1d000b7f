//! The small part of Python's expression grammar that repro scripts use:
//! names, attribute access, calls with keyword arguments, lists, tuples,
//! numbers, strings, `True`/`False`/`None` and unary minus.

use crate::error::{expected, invalid, PResult, Source, Span};
use crate::lex::{Line, Tok, Token};
use fusebench_ir::Literal;

#[derive(Clone, Debug)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub(crate) enum ExprKind {
    Name(String),
    /// A magnitude; `-` is [`ExprKind::Neg`].
    Int(u128),
    Float(f64),
    /// `2.5j`, and `1.0+2.5j` (the real part, then the imaginary one).
    Imag(f64),
    Complex(Box<Expr>, f64),
    Str(String),
    Bool(bool),
    None,
    Neg(Box<Expr>),
    Attr(Box<Expr>, String),
    Call(Box<Expr>, Vec<Arg>),
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
}

#[derive(Clone, Debug)]
pub(crate) struct Arg {
    pub keyword: Option<(String, Span)>,
    pub value: Expr,
}

/// Python's reserved words: never names of values.
pub(crate) const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Whether `s` reads back as one identifier that is not a keyword.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut it = s.chars();
    it.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && it.all(|c| c == '_' || c.is_alphanumeric())
        && !KEYWORDS.contains(&s)
}

/// Deeper nesting than any script needs; the limit keeps recursion off the stack's edge.
const MAX_DEPTH: usize = 100;

/// Reads the tokens of one logical line.
pub(crate) struct Cursor<'a, 's> {
    pub src: &'a Source<'s>,
    toks: &'a [Token],
    pos: usize,
    /// Where the line ends, for errors that point past the last token.
    end: usize,
    depth: usize,
}

impl<'a, 's> Cursor<'a, 's> {
    pub fn new(src: &'a Source<'s>, line: &'a Line) -> Self {
        Cursor {
            src,
            toks: &line.tokens,
            pos: 0,
            end: line.end,
            depth: 0,
        }
    }

    pub fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.pos)
    }

    pub fn peek_at(&self, k: usize) -> Option<&'a Token> {
        self.toks.get(self.pos + k)
    }

    pub fn next(&mut self) -> Option<&'a Token> {
        let t = self.toks.get(self.pos);
        self.pos += t.is_some() as usize;
        t
    }

    /// The span of the next token, or an empty span at the end of the line.
    pub fn here(&self) -> Span {
        self.peek()
            .map_or(Span::new(self.end, self.end), |t| t.span)
    }

    /// How the next token reads in an error message.
    pub fn found(&self) -> String {
        match self.peek() {
            None if self.end >= self.src.text.len() => "end of file".into(),
            None => "end of line".into(),
            Some(t) => describe(self.src, t),
        }
    }

    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Token { tok: Tok::Punct(q), .. }) if *q == p)
    }

    pub fn is_name(&self, n: &str) -> bool {
        matches!(self.peek(), Some(Token { tok: Tok::Name(m), .. }) if m == n)
    }

    pub fn eat_punct(&mut self, p: &str) -> Option<Span> {
        if self.is_punct(p) {
            self.next().map(|t| t.span)
        } else {
            None
        }
    }

    pub fn expect_punct(&mut self, p: &str, what: &str) -> PResult<Span> {
        self.eat_punct(p)
            .ok_or_else(|| expected(self.here(), what, self.found()))
    }

    pub fn expect_keyword(&mut self, k: &str, what: &str) -> PResult<Span> {
        if self.is_name(k) {
            Ok(self.next().map(|t| t.span).unwrap_or_default())
        } else {
            Err(expected(self.here(), what, self.found()))
        }
    }

    /// Any identifier, keywords included; callers check what they need.
    pub fn expect_name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek() {
            Some(Token {
                tok: Tok::Name(n),
                span,
            }) => {
                self.pos += 1;
                Ok((n.clone(), *span))
            }
            _ => Err(expected(self.here(), what, self.found())),
        }
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub fn expect_end(&self) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(expected(self.here(), "end of line", self.found()))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(invalid(
                self.here(),
                format!("expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.unary().map(|e| self.complex_tail(e));
        self.depth -= 1;
        e
    }

    /// `re + imj` / `re - imj`: Python's complex constants, the only binary
    /// `+`/`-` the scripts hold.
    fn complex_tail(&mut self, e: Expr) -> Expr {
        let sign = if self.is_punct("+") { 1.0 } else if self.is_punct("-") { -1.0 } else { return e };
        let Some(Token { tok: Tok::Imag(im), span }) = self.peek_at(1) else { return e };
        let span = e.span.to(*span);
        self.pos += 2;
        Expr { kind: ExprKind::Complex(Box::new(e), sign * im), span }
    }

    fn unary(&mut self) -> PResult<Expr> {
        if let Some(s) = self.eat_punct("-") {
            let inner = self.expr()?;
            let span = s.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(inner)),
                span,
            });
        }
        if let Some(s) = self.eat_punct("+") {
            let mut inner = self.expr()?;
            inner.span = s.to(inner.span);
            return Ok(inner);
        }
        self.postfix()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        loop {
            if self.eat_punct(".").is_some() {
                let (name, s) = self.expect_name("a name after `.`")?;
                let span = e.span.to(s);
                e = Expr {
                    kind: ExprKind::Attr(Box::new(e), name),
                    span,
                };
            } else if let Some(open) = self.eat_punct("(") {
                let (args, close) = self.args(open)?;
                let span = e.span.to(close);
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), args),
                    span,
                };
            } else if self.is_punct("[") {
                return Err(invalid(
                    self.here(),
                    "subscripts (`x[...]`) are not supported",
                ));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let Some(t) = self.peek() else {
            return Err(expected(self.here(), "an expression", self.found()));
        };
        let span = t.span;
        let kind = match &t.tok {
            Tok::Name(n) => match n.as_str() {
                "True" => ExprKind::Bool(true),
                "False" => ExprKind::Bool(false),
                "None" => ExprKind::None,
                k if KEYWORDS.contains(&k) => {
                    return Err(expected(span, "an expression", self.found()))
                }
                _ => ExprKind::Name(n.clone()),
            },
            Tok::Int(v) => ExprKind::Int(*v),
            Tok::Float(v) => ExprKind::Float(*v),
            Tok::Imag(v) => ExprKind::Imag(*v),
            Tok::Str(s) => ExprKind::Str(s.clone()),
            Tok::Punct("(") => {
                self.pos += 1;
                return self.paren(span);
            }
            Tok::Punct("[") => {
                self.pos += 1;
                let (items, close) = self.sequence(span, "]")?;
                return Ok(Expr {
                    kind: ExprKind::List(items),
                    span: span.to(close),
                });
            }
            Tok::Punct("{") => return Err(invalid(span, "dicts and sets are not supported")),
            Tok::Punct(_) => return Err(expected(span, "an expression", self.found())),
        };
        self.pos += 1;
        Ok(Expr { kind, span })
    }

    /// After `(`: a parenthesized expression or a tuple.
    fn paren(&mut self, open: Span) -> PResult<Expr> {
        self.enter()?;
        let r = (|| {
            if let Some(close) = self.eat_punct(")") {
                return Ok(Expr {
                    kind: ExprKind::Tuple(vec![]),
                    span: open.to(close),
                });
            }
            let first = self.expr()?;
            if let Some(close) = self.eat_punct(")") {
                return Ok(Expr {
                    span: open.to(close),
                    ..first
                });
            }
            let what = self.closing("`,` or `)`", "(", open);
            self.expect_punct(",", &what)?;
            let mut items = vec![first];
            if let Some(close) = self.eat_punct(")") {
                return Ok(Expr {
                    kind: ExprKind::Tuple(items),
                    span: open.to(close),
                });
            }
            let (rest, close) = self.sequence(open, ")")?;
            items.extend(rest);
            Ok(Expr {
                kind: ExprKind::Tuple(items),
                span: open.to(close),
            })
        })();
        self.depth -= 1;
        r
    }

    fn closing(&self, what: &str, bracket: &str, open: Span) -> String {
        format!(
            "{what} to close the `{bracket}` at {}",
            self.src.at(open.start)
        )
    }

    /// Comma-separated expressions up to `close`; a trailing comma is allowed.
    fn sequence(&mut self, open: Span, close: &str) -> PResult<(Vec<Expr>, Span)> {
        self.enter()?;
        let bracket = if close == "]" { "[" } else { "(" };
        let mut items = vec![];
        let r = loop {
            if let Some(c) = self.eat_punct(close) {
                break Ok((items, c));
            }
            match self.expr() {
                Ok(e) => items.push(e),
                Err(e) => break Err(e),
            }
            if let Some(c) = self.eat_punct(close) {
                break Ok((items, c));
            }
            let what = self.closing(&format!("`,` or `{close}`"), bracket, open);
            if let Err(e) = self.expect_punct(",", &what) {
                break Err(e);
            }
        };
        self.depth -= 1;
        r
    }

    /// After `(` of a call: arguments up to `)`.
    fn args(&mut self, open: Span) -> PResult<(Vec<Arg>, Span)> {
        self.enter()?;
        let mut args: Vec<Arg> = vec![];
        let r = loop {
            if let Some(c) = self.eat_punct(")") {
                break Ok((args, c));
            }
            let keyword = match (self.peek(), self.peek_at(1)) {
                (
                    Some(Token {
                        tok: Tok::Name(n),
                        span,
                    }),
                    Some(Token {
                        tok: Tok::Punct("="),
                        ..
                    }),
                ) => {
                    self.pos += 2;
                    Some((n.clone(), *span))
                }
                _ => None,
            };
            let value = match self.expr() {
                Ok(v) => v,
                Err(e) => break Err(e),
            };
            match &keyword {
                Some((k, s)) => {
                    if args
                        .iter()
                        .any(|a| a.keyword.as_ref().is_some_and(|(k2, _)| k2 == k))
                    {
                        break Err(invalid(
                            *s,
                            format!("keyword argument `{k}` is given twice"),
                        ));
                    }
                }
                None => {
                    if args.iter().any(|a| a.keyword.is_some()) {
                        break Err(invalid(
                            value.span,
                            "a positional argument cannot follow keyword arguments",
                        ));
                    }
                }
            }
            args.push(Arg { keyword, value });
            if let Some(c) = self.eat_punct(")") {
                break Ok((args, c));
            }
            let what = self.closing("`,` or `)`", "(", open);
            if let Err(e) = self.expect_punct(",", &what) {
                break Err(e);
            }
        };
        self.depth -= 1;
        r
    }
}

pub(crate) fn describe(src: &Source, t: &Token) -> String {
    match &t.tok {
        Tok::Str(_) => format!("string {}", src.slice(t.span)),
        _ => format!("`{}`", src.slice(t.span)),
    }
}

impl Expr {
    /// `a.b.c` as its parts, if the expression is such a chain.
    pub fn path(&self) -> Option<Vec<(&str, Span)>> {
        match &self.kind {
            ExprKind::Name(n) => Some(vec![(n.as_str(), self.span)]),
            ExprKind::Attr(base, name) => {
                let mut p = base.path()?;
                let start = self.span.end - name.len();
                p.push((name.as_str(), Span::new(start, self.span.end)));
                Some(p)
            }
            _ => None,
        }
    }

    pub fn dotted(&self) -> Option<String> {
        self.path()
            .map(|p| p.iter().map(|(n, _)| *n).collect::<Vec<_>>().join("."))
    }

    /// The value of an integer literal, sign included.
    pub fn int(&self) -> Option<PResult<i128>> {
        match &self.kind {
            ExprKind::Int(m) => Some(
                i128::try_from(*m).map_err(|_| invalid(self.span, "integer literal is too large")),
            ),
            ExprKind::Neg(inner) => Some(inner.int()?.and_then(|v| {
                v.checked_neg()
                    .ok_or_else(|| invalid(self.span, "integer literal is too large"))
            })),
            _ => None,
        }
    }

    /// An integer literal that fits in i64.
    pub fn i64(&self) -> Option<PResult<i64>> {
        Some(self.int()?.and_then(|v| {
            i64::try_from(v)
                .map_err(|_| invalid(self.span, format!("integer {v} does not fit in 64 bits")))
        }))
    }

    /// A Python literal: a number, `True`/`False`, or `float("inf")` and kin.
    /// `None` when the expression is not of a literal's form at all.
    pub fn literal(&self) -> Option<PResult<Literal>> {
        // Integers as a whole, sign included: -2^63 fits where 2^63 does not.
        if let Some(v) = self.i64() {
            return Some(v.map(Literal::Int));
        }
        let lit = match &self.kind {
            ExprKind::Int(_) => return Some(self.i64()?.map(Literal::Int)),
            ExprKind::Float(v) => Literal::Float(*v),
            ExprKind::Bool(b) => Literal::Bool(*b),
            // A complex constant is held as its real part (fusebench's
            // complex scalars are real values of a complex dtype).
            ExprKind::Imag(im) | ExprKind::Complex(_, im) if *im != 0.0 => {
                return Some(Err(invalid(
                    self.span,
                    "complex constants with a nonzero imaginary part are not supported",
                )))
            }
            ExprKind::Imag(_) => Literal::Float(0.0),
            ExprKind::Complex(re, _) => {
                return Some(re.literal()?.map(|l| canonical(Literal::Float(l.as_f64()))))
            }
            ExprKind::Neg(inner) => {
                return Some(inner.literal()?.and_then(|l| match l {
                    Literal::Int(i) => i.checked_neg().map(Literal::Int).ok_or_else(|| {
                        invalid(self.span, "integer literal does not fit in 64 bits")
                    }),
                    Literal::Float(f) => Ok(canonical(Literal::Float(-f))),
                    Literal::Bool(_) => Err(invalid(
                        self.span,
                        "`-` of True or False is not supported; write the integer",
                    )),
                }))
            }
            ExprKind::Call(callee, args) if matches!(&callee.kind, ExprKind::Name(n) if n == "float") => {
                return Some(self.float_call(args))
            }
            _ => return None,
        };
        Some(Ok(canonical(lit)))
    }

    fn float_call(&self, args: &[Arg]) -> PResult<Literal> {
        let [Arg {
            keyword: None,
            value,
        }] = args
        else {
            return Err(invalid(
                self.span,
                "float(...) takes one argument, as in float(\"inf\")",
            ));
        };
        let v = match &value.kind {
            // Rust's parser takes what Python's `float()` takes for the special values.
            ExprKind::Str(s) => s.trim().parse::<f64>().map_err(|_| {
                invalid(
                    value.span,
                    format!(
                        "float({:?}) is not a number; use \"inf\", \"-inf\" or \"nan\"",
                        s
                    ),
                )
            })?,
            _ => match value.literal() {
                Some(l) => l?.as_f64(),
                None => {
                    return Err(invalid(
                        value.span,
                        "float(...) takes a string like \"inf\" or a number",
                    ))
                }
            },
        };
        Ok(canonical(Literal::Float(v)))
    }
}

/// One NaN for all: literals compare bitwise, and a NaN prints as `float("nan")`
/// whatever its sign or payload.
fn canonical(l: Literal) -> Literal {
    match l {
        Literal::Float(f) if f.is_nan() => Literal::Float(f64::NAN),
        other => other,
    }
}
