//! The layout of a repro script: imports, the `def` that builds the fusion,
//! the `with FusionDefinition() as fd:` block, the inputs list and
//! `fd.execute(inputs)`; and the statements of the `def` body.

use crate::error::{diag, expected, invalid, ErrorKind, PResult, Source, Span};
use crate::expr::{Cursor, Expr, ExprKind, KEYWORDS};
use crate::lex::{lex, Line, Tok};
use fusebench_ir::dtype::ALL_DTYPES;
use fusebench_ir::{
    DType, Fusion, FusionBuilder, IrError, Literal, ScriptInfo, Syntax, ValueDef, ValueId,
};
use std::collections::HashMap;

/// Shapes of the fusion's inputs, by input position, that bind symbolic
/// extents: from `given` (a `--data` file) where present, else from the
/// script's inputs list.
pub type GivenShapes = [Option<Vec<usize>>];

fn bound_shapes(
    given: Option<&GivenShapes>,
    recipe: Option<&[fusebench_ir::InputRecipe]>,
) -> Vec<Option<(Vec<usize>, &'static str)>> {
    let n = given.map_or(0, |g| g.len()).max(recipe.map_or(0, |r| r.len()));
    (0..n)
        .map(|k| {
            given
                .and_then(|g| g.get(k).cloned().flatten())
                .map(|s| (s, "the data file"))
                .or_else(|| {
                    recipe
                        .and_then(|r| r.get(k))
                        .and_then(|r| r.shape())
                        .map(|s| (s, "the script's inputs list"))
                })
        })
        .collect()
}

pub(crate) fn parse(src: &Source, given: Option<&GivenShapes>) -> PResult<Fusion> {
    let lexed = lex(src)?;
    let lines = &lexed.lines;
    let eof = Span::new(src.text.len(), src.text.len());
    let mut i = 0;

    let mut syntax: Option<(Syntax, Span)> = None;
    loop {
        let Some(line) = lines.get(i) else {
            return Err(expected(
                eof,
                "`def nvfuser_fusion(fd : FusionDefinition) -> None :`",
                "end of file",
            ));
        };
        top_level(line)?;
        let mut c = Cursor::new(src, line);
        if c.is_name("import") {
            import(&mut c)?;
        } else if c.is_name("from") {
            let (s, span) = from_import(&mut c)?;
            if let Some((prev, at)) = syntax {
                if prev != s {
                    return Err(invalid(
                        span,
                        format!("this import contradicts the one at {}: a script is either legacy (nvfuser) or direct (nvfuser_direct)", src.at(at.start)),
                    ));
                }
            }
            syntax = Some((s, span));
        } else if c.is_name("def") {
            break;
        } else {
            return Err(expected(
                c.here(),
                "`import torch`, `from nvfuser_direct import FusionDefinition, DataType` or `def`",
                c.found(),
            ));
        }
        i += 1;
    }

    let def_line = &lines[i];
    let mut c = Cursor::new(src, def_line);
    let Some((syntax, _)) = syntax else {
        return Err(expected(
            c.here(),
            "`from nvfuser import FusionDefinition, DataType` (legacy) or `from nvfuser_direct import FusionDefinition, DataType` (direct) before the fusion definition",
            c.found(),
        ));
    };
    let (function_name, fd_name) = def_header(&mut c)?;
    i += 1;

    let body_start = i;
    while lines.get(i).is_some_and(|l| !l.indent.is_empty()) {
        i += 1;
    }
    if body_start == i {
        let here = lines.get(i).map_or(eof, |l| l.tokens[0].span);
        let found = lines.get(i).map_or("end of file".to_string(), |l| {
            format!("`{}`", src.slice(l.tokens[0].span))
        });
        return Err(expected(
            here,
            format!("an indented body for `def {function_name}`"),
            found,
        ));
    }

    let body_end = i;

    let mut with_var: Option<String> = None;
    let mut inputs: Option<(String, Vec<fusebench_ir::InputRecipe>)> = None;
    let mut executed = false;
    while let Some(line) = lines.get(i) {
        top_level(line)?;
        let mut c = Cursor::new(src, line);
        let is_assign = matches!(c.peek().map(|t| &t.tok), Some(Tok::Name(_)))
            && matches!(c.peek_at(1).map(|t| &t.tok), Some(Tok::Punct("=")));
        if c.is_name("with") {
            if with_var.is_some() {
                return Err(invalid(
                    c.here(),
                    "a second `with FusionDefinition() as fd:` block",
                ));
            }
            let var = with_header(&mut c)?;
            i += 1;
            let call_line = lines.get(i).filter(|l| !l.indent.is_empty());
            let Some(call_line) = call_line else {
                let here = lines.get(i).map_or(eof, |l| l.tokens[0].span);
                return Err(expected(
                    here,
                    format!("an indented `{function_name}({var})`"),
                    "no indented line",
                ));
            };
            with_body(src, call_line, &function_name, &var)?;
            with_var = Some(var);
        } else if is_assign {
            let (name, span) = c.expect_name("a name")?;
            if inputs.is_some() {
                return Err(invalid(span, "a second inputs list; a script has one"));
            }
            if with_var.as_deref() == Some(name.as_str()) || name == function_name {
                return Err(invalid(
                    span,
                    format!("naming the inputs list `{name}` would hide the fusion"),
                ));
            }
            c.expect_punct("=", "`=`")?;
            let e = c.expr()?;
            c.expect_end()?;
            inputs = Some((name, crate::inputs::parse_inputs(src, &e)?));
        } else if c.peek_at(1).is_some_and(|t| t.tok == Tok::Punct("."))
            && c.peek_at(2)
                .is_some_and(|t| t.tok == Tok::Name("execute".into()))
        {
            let e = c.expr()?;
            c.expect_end()?;
            execute(
                src,
                &e,
                with_var.as_deref(),
                inputs.as_ref().map(|(n, _)| n.as_str()),
            )?;
            if executed {
                return Err(invalid(e.span, "a second `fd.execute(...)`"));
            }
            executed = true;
        } else if c.is_name("def") {
            // A script that defines two fusions: which one a reader meant is not ours to guess.
            return Err(invalid(
                c.here(),
                "a second fusion definition (`def`); a script holds one fusion: put each in its own file",
            ));
        } else {
            return Err(expected(
                c.here(),
                "`with FusionDefinition() as fd:`, `inputs = [...]` or `fd.execute(inputs)`",
                c.found(),
            ));
        }
        i += 1;
    }
    if with_var.is_none() {
        return Err(expected(
            eof,
            format!("`with FusionDefinition() as fd:` and `{function_name}(fd)`, which build the fusion"),
            "end of file",
        ));
    }

    // The body is read after the inputs list: symbolic (-1) extents of
    // define_tensor are bound from the inputs the script creates.
    let mut body = Body {
        src,
        b: FusionBuilder::new(),
        names: HashMap::new(),
        vectors: HashMap::new(),
        fd: fd_name,
        bound: bound_shapes(given, inputs.as_ref().map(|(_, r)| r.as_slice())),
        scalars: inputs
            .as_ref()
            .map(|(_, r)| {
                r.iter()
                    .map(|x| match x {
                        fusebench_ir::InputRecipe::Scalar { value } => Some(*value),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let indent = &lines[body_start].indent;
    for line in &lines[body_start..body_end] {
        if &line.indent != indent {
            return Err(invalid(
                Span::new(line.start() - line.indent.len(), line.start()),
                "indentation differs from the first line of the body",
            ));
        }
        body.statement(line)?;
    }

    body.b.script_info(ScriptInfo {
        syntax,
        header: lexed.header.clone(),
        function_name,
    });
    let mut f = body.b.finish();
    f.recipe = inputs.map(|(_, r)| r);
    Ok(f)
}

fn top_level(line: &Line) -> PResult<()> {
    if line.indent.is_empty() {
        Ok(())
    } else {
        Err(invalid(
            Span::new(line.start() - line.indent.len(), line.start()),
            "unexpected indentation outside the fusion definition",
        ))
    }
}

/// `import torch`, `import nvfuser`: accepted and not needed.
fn import(c: &mut Cursor) -> PResult<()> {
    c.next();
    let (m, span) = c.expect_name("a module name")?;
    if !matches!(m.as_str(), "torch" | "nvfuser" | "nvfuser_direct") {
        return Err(invalid(
            span,
            format!(
                "import of `{m}`: a repro script imports torch and nvfuser or nvfuser_direct only"
            ),
        ));
    }
    while c.eat_punct(".").is_some() {
        c.expect_name("a module name")?;
    }
    if c.is_name("as") {
        return Err(invalid(c.here(), "`import ... as ...` is not supported"));
    }
    c.expect_end()
}

/// `from nvfuser import ...` (legacy) or `from nvfuser_direct import ...` (direct).
fn from_import(c: &mut Cursor) -> PResult<(Syntax, Span)> {
    c.next();
    let (m, span) = c.expect_name("`nvfuser` or `nvfuser_direct`")?;
    let syntax = match m.as_str() {
        "nvfuser" => Syntax::Legacy,
        "nvfuser_direct" => Syntax::Direct,
        _ => {
            return Err(expected(
                span,
                "`nvfuser` or `nvfuser_direct`",
                format!("`{m}`"),
            ))
        }
    };
    if c.is_punct(".") {
        return Err(invalid(
            c.here(),
            format!("imports from submodules of {m} are not supported"),
        ));
    }
    c.expect_keyword("import", "`import`")?;
    loop {
        c.expect_name("a name to import")?;
        if c.eat_punct(",").is_none() {
            break;
        }
    }
    c.expect_end()?;
    Ok((syntax, span))
}

/// `def NAME(fd : FusionDefinition) -> None :`; returns the function's name and `fd`'s.
fn def_header(c: &mut Cursor) -> PResult<(String, String)> {
    c.next();
    let (name, span) = c.expect_name("the function's name")?;
    if KEYWORDS.contains(&name.as_str()) {
        return Err(invalid(span, format!("`{name}` is a Python keyword")));
    }
    c.expect_punct("(", "`(`")?;
    let (fd, fd_span) = c.expect_name("the parameter `fd`")?;
    if KEYWORDS.contains(&fd.as_str()) {
        return Err(invalid(fd_span, format!("`{fd}` is a Python keyword")));
    }
    if c.eat_punct(":").is_some() {
        let e = c.expr()?;
        if e.path().is_none() {
            return Err(expected(
                e.span,
                "a type such as `FusionDefinition`",
                format!("`{}`", c.src.slice(e.span)),
            ));
        }
    }
    if c.is_punct(",") {
        return Err(invalid(
            c.here(),
            "the fusion definition takes one parameter, `fd`",
        ));
    }
    c.expect_punct(")", "`)`")?;
    if c.eat_punct("->").is_some() {
        c.expr()?;
    }
    c.expect_punct(":", "`:`")?;
    if !c.at_end() {
        return Err(expected(
            c.here(),
            "the body on the following lines",
            c.found(),
        ));
    }
    Ok((name, fd))
}

/// `with FusionDefinition() as fd:`; returns `fd`'s name.
fn with_header(c: &mut Cursor) -> PResult<String> {
    c.next();
    let e = c.expr()?;
    let ok = matches!(&e.kind, ExprKind::Call(callee, args)
        if args.is_empty() && callee.path().is_some_and(|p| p.last().is_some_and(|(n, _)| *n == "FusionDefinition")));
    if !ok {
        return Err(expected(
            e.span,
            "`FusionDefinition()`",
            format!("`{}`", c.src.slice(e.span)),
        ));
    }
    c.expect_keyword("as", "`as`")?;
    let (var, span) = c.expect_name("a name for the FusionDefinition")?;
    if KEYWORDS.contains(&var.as_str()) {
        return Err(invalid(span, format!("`{var}` is a Python keyword")));
    }
    c.expect_punct(":", "`:`")?;
    c.expect_end()?;
    Ok(var)
}

fn with_body(src: &Source, line: &Line, function: &str, var: &str) -> PResult<()> {
    let mut c = Cursor::new(src, line);
    let e = c.expr()?;
    c.expect_end()?;
    let ok = matches!(&e.kind, ExprKind::Call(callee, args)
        if matches!(&callee.kind, ExprKind::Name(n) if n == function)
            && matches!(args.as_slice(), [a] if a.keyword.is_none() && matches!(&a.value.kind, ExprKind::Name(n) if n == var)));
    if !ok {
        return Err(expected(
            e.span,
            format!("`{function}({var})`"),
            format!("`{}`", src.slice(e.span)),
        ));
    }
    Ok(())
}

fn execute(src: &Source, e: &Expr, with_var: Option<&str>, inputs: Option<&str>) -> PResult<()> {
    let ExprKind::Call(callee, args) = &e.kind else {
        return Err(expected(
            e.span,
            "`fd.execute(inputs)`",
            format!("`{}`", src.slice(e.span)),
        ));
    };
    let path = callee.path().unwrap_or_default();
    let Some(&(var, var_span)) = path.first().filter(|_| path.len() == 2) else {
        return Err(expected(
            e.span,
            "`fd.execute(inputs)`",
            format!("`{}`", src.slice(e.span)),
        ));
    };
    match with_var {
        None => {
            return Err(invalid(
                var_span,
                format!("`{var}` is used before `with FusionDefinition() as {var}:`"),
            ))
        }
        Some(w) if w != var => {
            return Err(diag(
                var_span,
                ErrorKind::UndefinedName {
                    name: var.to_string(),
                },
            ))
        }
        _ => {}
    }
    let [a] = args.as_slice() else {
        return Err(invalid(
            e.span,
            "fd.execute takes one argument, the inputs list",
        ));
    };
    if a.keyword.is_some() {
        return Err(invalid(
            a.value.span,
            "fd.execute takes the inputs list as its only argument",
        ));
    }
    match (&a.value.kind, inputs) {
        (ExprKind::Name(n), Some(i)) if n == i => Ok(()),
        (ExprKind::Name(n), _) => Err(diag(
            a.value.span,
            ErrorKind::UndefinedName { name: n.clone() },
        )),
        _ => Err(expected(
            a.value.span,
            "the name of the inputs list",
            format!("`{}`", src.slice(a.value.span)),
        )),
    }
}

/// The `def` body being read: the builder and what each name means now.
pub(crate) struct Body<'a, 's> {
    pub src: &'a Source<'s>,
    pub b: FusionBuilder,
    pub names: HashMap<String, ValueId>,
    /// Vectors (`define_vector`, `fd.ops.shape`): their elements, scalars.
    pub vectors: HashMap<String, Vec<ValueId>>,
    /// The `def`'s parameter: `fd` in `fd.ops.add`.
    pub fd: String,
    /// Per input position, the actual shape that binds symbolic extents, and where it came from.
    pub bound: Vec<Option<(Vec<usize>, &'static str)>>,
    /// Per input position, the script's scalar value (binds iota's length).
    pub scalars: Vec<Option<Literal>>,
}

/// Names a value may not take: rebinding them would break the script's own
/// references to them (`DataType.Float`, `float("inf")`).
const RESERVED: &[&str] = &["DataType", "float"];

impl Body<'_, '_> {
    fn statement(&mut self, line: &Line) -> PResult<()> {
        let mut c = Cursor::new(self.src, line);
        if c.is_name("pass") {
            c.next();
            return c.expect_end();
        }
        let mut targets: Vec<(String, Span)> = vec![];
        let mut tuple = false;
        let starts_assign = matches!(c.peek().map(|t| &t.tok), Some(Tok::Name(_)))
            && matches!(
                c.peek_at(1).map(|t| &t.tok),
                Some(Tok::Punct(",")) | Some(Tok::Punct("="))
            );
        if starts_assign {
            loop {
                let (n, s) = c.expect_name("a name")?;
                self.check_target(&n, s)?;
                targets.push((n, s));
                if c.eat_punct(",").is_some() {
                    tuple = true;
                    if c.is_punct("=") {
                        break;
                    }
                } else {
                    break;
                }
            }
            c.expect_punct("=", "`=`")?;
        }
        let rhs = c.expr()?;
        c.expect_end()?;
        let what = "a call of fd.ops.<op>, fd.define_tensor, fd.define_scalar or fd.add_output";
        let ExprKind::Call(callee, args) = &rhs.kind else {
            return Err(expected(
                rhs.span,
                what,
                format!("`{}`", self.src.slice(rhs.span)),
            ));
        };
        let path = callee.path().unwrap_or_default();
        let Some(&(_, root_span)) = path.first().filter(|(r, _)| *r == self.fd) else {
            return Err(expected(
                callee.span,
                what,
                format!("`{}`", self.src.slice(callee.span)),
            ));
        };
        let call = crate::ops::Call {
            span: rhs.span,
            args,
        };
        let fd = self.fd.clone();
        match path.get(1..).unwrap_or_default() {
            [("define_tensor", _)] | [("define_scalar", _)] => {
                let name = self.single_target(&targets, tuple, &rhs, &format!("{fd}.{}", path[1].0))?;
                let v = if path[1].0 == "define_tensor" {
                    self.define_tensor(&call, &name)?
                } else {
                    self.define_scalar(&call, &name)?
                };
                self.vectors.remove(&name);
                self.names.insert(name, v);
            }
            [("define_constant", _)] => {
                let name = self.single_target(&targets, tuple, &rhs, &format!("{fd}.define_constant"))?;
                let v = self.define_scalar(&call, &name)?;
                self.vectors.remove(&name);
                self.names.insert(name, v);
            }
            [("define_vector", _)] => {
                let name = self.single_target(&targets, tuple, &rhs, &format!("{fd}.define_vector"))?;
                let v = self.define_vector(&call, &name)?;
                self.names.remove(&name);
                self.vectors.insert(name, v);
            }
            [("ops", _), (op, _)] if crate::ops_defn::VECTOR_OPS.contains(op) => {
                self.vector_op(op, &call, &targets, tuple)?;
            }
            [("add_output", _)] => {
                if let Some((_, s)) = targets.first() {
                    return Err(invalid(*s, "fd.add_output returns nothing to assign"));
                }
                self.add_output(&call)?;
            }
            [("ops", _), (op, _)] if crate::ops_composite::is_composite(op) => {
                let names: Vec<String> = targets.iter().map(|(n, _)| n.clone()).collect();
                self.expanded(op, &call, &names)?;
            }
            [("ops", _), (op, op_span)] => {
                let op = self.op(op, root_span.to(*op_span), &call)?;
                let n = op.num_outputs();
                // Python values beyond the op's outputs are None (`scaled_mm`).
                let py = match &op { fusebench_ir::Op::Gemm(o) => o.python_returns(), _ => n };
                let opname = format!("{fd}.ops.{}", op.name());
                if targets.is_empty() {
                    return Err(invalid(rhs.span, format!("the result of {opname} must be assigned to a name")));
                }
                if py == 1 && tuple {
                    return Err(invalid(targets[0].1.to(targets.last().unwrap().1), format!("{opname} returns one value; assign it to one name")));
                }
                if py > 1 && (!tuple || targets.len() != py) {
                    let names = ["a", "b", "c", "d"][..py.min(4)].join(", ");
                    return Err(invalid(
                        targets[0].1.to(targets.last().unwrap().1),
                        format!("{opname} returns {py} values; assign them as `{names} = ...`"),
                    ));
                }
                let names: Vec<&str> = targets.iter().take(n).map(|(n, _)| n.as_str()).collect();
                let outs = self.b.op(op, &names).map_err(|e| self.ir(rhs.span, e))?;
                for ((n, _), v) in targets.iter().zip(outs) {
                    self.vectors.remove(n);
                    self.names.insert(n.clone(), v);
                }
                for (n, _) in &targets[n.min(targets.len())..] {
                    self.vectors.remove(n);
                    self.names.remove(n);
                }
            }
            [(m, s)] => {
                return Err(invalid(
                    *s,
                    format!("unknown method {fd}.{m}; supported: define_tensor, define_scalar, define_constant, define_vector, add_output, ops.<op>"),
                ))
            }
            _ => return Err(expected(callee.span, what, format!("`{}`", self.src.slice(callee.span)))),
        }
        Ok(())
    }

    fn check_target(&self, n: &str, s: Span) -> PResult<()> {
        if KEYWORDS.contains(&n) {
            return Err(invalid(
                s,
                format!("`{n}` is a Python keyword and cannot name a value"),
            ));
        }
        if n == self.fd {
            return Err(invalid(
                s,
                format!("assigning to `{n}` would hide the FusionDefinition"),
            ));
        }
        if RESERVED.contains(&n) {
            return Err(invalid(
                s,
                format!("assigning to `{n}` would hide the `{n}` the script uses"),
            ));
        }
        Ok(())
    }

    fn single_target(
        &self,
        targets: &[(String, Span)],
        tuple: bool,
        rhs: &Expr,
        callee: &str,
    ) -> PResult<String> {
        match targets {
            [] => Err(invalid(
                rhs.span,
                format!("the result of {callee} must be assigned to a name"),
            )),
            [(n, _)] if !tuple => Ok(n.clone()),
            [(_, s), ..] => Err(invalid(
                *s,
                format!("{callee} returns one value; assign it to one name"),
            )),
        }
    }

    pub fn ir(&self, span: Span, e: IrError) -> crate::error::Diag {
        diag(span, ErrorKind::Ir(e))
    }

    /// A value operand: a name bound earlier, or a literal, which becomes a value of its own.
    pub fn operand(&mut self, e: &Expr) -> PResult<ValueId> {
        if let ExprKind::Name(n) = &e.kind {
            return self.lookup(n, e.span);
        }
        match e.literal() {
            Some(l) => Ok(self.b.literal(l?)),
            None => Err(expected(
                e.span,
                "a value's name or a literal",
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }

    pub fn lookup(&self, n: &str, span: Span) -> PResult<ValueId> {
        self.names.get(n).copied().ok_or_else(|| {
            diag(
                span,
                ErrorKind::UndefinedName {
                    name: n.to_string(),
                },
            )
        })
    }

    /// An integer argument: a literal, or the name of a scalar whose integer value is known.
    pub fn int(&self, e: &Expr, what: &str) -> PResult<i64> {
        if let Some(v) = e.i64() {
            return v;
        }
        if let ExprKind::Name(n) = &e.kind {
            let v = self.b.fusion().value(self.lookup(n, e.span)?);
            return match (v.is_tensor(), v.constant, &v.def) {
                (false, Some(Literal::Int(i)), _) => Ok(i),
                (true, _, _) => Err(invalid(e.span, format!("{what} must be an integer, but `{n}` is a tensor"))),
                (false, _, ValueDef::ScalarInput) => Err(invalid(
                    e.span,
                    format!("{what} must be known when the fusion is built, but `{n}` is a fusion input"),
                )),
                (false, _, _) => Err(invalid(e.span, format!("{what} must be an integer, but `{n}` is not a constant integer"))),
            };
        }
        Err(expected(
            e.span,
            format!("an integer for {what}"),
            format!("`{}`", self.src.slice(e.span)),
        ))
    }

    /// A list or tuple of integers; a single integer is taken as a list of one.
    pub fn ints(&self, e: &Expr, what: &str) -> PResult<Vec<i64>> {
        match &e.kind {
            ExprKind::Name(n) if self.vectors.contains_key(n) => self.vectors[n]
                .iter()
                .map(|&v| self.known_int(v, e.span, what))
                .collect(),
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items.iter().map(|x| self.int(x, what)).collect()
            }
            _ if e.i64().is_some() => Ok(vec![self.int(e, what)?]),
            _ => Err(expected(
                e.span,
                format!("a list of integers for {what}"),
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }

    pub fn boolean(&self, e: &Expr, what: &str) -> PResult<bool> {
        match e.kind {
            ExprKind::Bool(b) => Ok(b),
            _ => Err(expected(
                e.span,
                format!("True or False for {what}"),
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }

    pub fn bools(&self, e: &Expr, what: &str) -> PResult<Vec<bool>> {
        match &e.kind {
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                items.iter().map(|x| self.boolean(x, what)).collect()
            }
            _ => Err(expected(
                e.span,
                format!("a list of True/False for {what}"),
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }

    /// `DataType.X`; `DataType.Null` and `None` give `None` where `nullable`.
    pub fn dtype(&self, e: &Expr, nullable: bool) -> PResult<Option<DType>> {
        let mut supported: Vec<String> =
            ALL_DTYPES.iter().map(|d| format!("DataType.{d}")).collect();
        if nullable {
            supported.push("DataType.Null".into());
        }
        if nullable && matches!(e.kind, ExprKind::None) {
            return Ok(None);
        }
        let path = e.path().unwrap_or_default();
        match path.as_slice() {
            [.., ("DataType", _), (x, _)] => {
                if nullable && *x == "Null" {
                    return Ok(None);
                }
                if fusebench_ir::dtype::UNSUPPORTED_DTYPE_NAMES.contains(x) {
                    return Err(diag(
                        e.span,
                        ErrorKind::Invalid(format!(
                            "DataType.{x} is not supported: fusebench has no packed 4-bit float storage \
                             (supported: {})",
                            supported.join(", ")
                        )),
                    ));
                }
                DType::from_nvfuser_name(x).map(Some).ok_or_else(|| {
                    diag(
                        e.span,
                        ErrorKind::UnknownDType {
                            written: format!("DataType.{x}"),
                            supported,
                        },
                    )
                })
            }
            _ => Err(expected(
                e.span,
                "a dtype such as `DataType.Float`",
                format!("`{}`", self.src.slice(e.span)),
            )),
        }
    }
}
