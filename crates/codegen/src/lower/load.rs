//! Loads from global memory: one element, or a vector of lanes read at
//! once where the index and the alignment allow.

use super::*;

impl<'f> Lowerer<'f> {
    pub(super) fn load(&mut self, v: ValueId, b: &Buffer, idx: &[Ix]) -> String {
        let depth = self.scopes.len();
        if let Some(l) = &mut self.loads {
            l.push((v, idx.to_vec(), depth));
        }
        let off = Self::offset(b, idx);
        if let Some(l) = self.lanes.clone() {
            if self.scopes_block_vectors == 0
                && self.scopes.len() == self.vector_depth + self.branch_path.len()
            {
                if let Some(e) = self.vector_load(v, b, &off, &l) {
                    self.remember((v, idx.to_vec()), e.clone());
                    return e;
                }
            }
        }
        // A per-row value copied with the row (next_row.rs), outside any
        // branch: its index is then valid for every row.
        let plain = !b.dtype.is_complex() && b.dtype != DType::Bool && !b.shared;
        let copied = plain && b.dtype.size_bytes() == 4 && self.branch_path.is_empty() && self.scopes_block_vectors == 0;
        if let Some(slot) = self.next_row.as_mut().filter(|_| copied).and_then(|n| n.load(&b.param, &off, 4)) {
            let e = format!("*reinterpret_cast<const {}*>(&{slot})", ctype::storage(b.dtype));
            return self.bind(v, idx, ctype::from_storage(b.dtype, &e));
        }
        // __ldg has overloads for scalar and vector types only: a complex
        // element (a struct of two parts) is read with a plain load.
        let load = if b.dtype.is_complex() || b.shared || self.load_fn.is_empty() {
            format!("{}[{off}]", b.param)
        } else {
            format!("{}(&{}[{off}])", self.load_fn, b.param)
        };
        let e = ctype::from_storage(b.dtype, &load);
        let e = if b.dtype == DType::Bool {
            format!("({}[{off}] != 0)", b.param)
        } else {
            e
        };
        self.bind(v, idx, e)
    }

    /// A load whose lanes read consecutive aligned elements becomes one wide
    /// load shared by every lane.
    pub(super) fn vector_load(&mut self, v: ValueId, b: &Buffer, off: &Ix, l: &Lanes) -> Option<String> {
        let elem = b.dtype.size_bytes();
        let size = elem * l.width;
        if l.width < 2
            || !(size == 4 || size == 8 || size.is_multiple_of(16))
            || b.dtype == DType::Bool
        {
            return None;
        }
        let w = l.width as i64;
        if off.lane_step(&l.var, w)? != 1 {
            return None;
        }
        let (rest, k) = off.pull_lanes(&l.var, w).split_const();
        if !rest.multiple_of(w, &[&l.var]) || k.rem_euclid(w) != l.lane as i64 {
            return None;
        }
        // Lane 0's element: aligned to the width, so one wide load serves all lanes.
        let base = rest.add(Ix::c(k - l.lane as i64));
        let key = (v, base.clone(), self.branch_path.clone());
        let arr = match self.vector_loads.get(&key) {
            Some(a) => a.clone(),
            None => {
                let a = self.fresh("w");
                let st = ctype::storage(b.dtype);
                let (word, wbytes) = match size {
                    4 => ("unsigned int", 4),
                    8 => ("uint2", 8),
                    _ => ("uint4", 16),
                };
                let decl = format!("__align__(16) {st} {a}[{}];", l.width);
                match (self.branch_path.is_empty(), self.hoist_at) {
                    (false, Some(at)) => {
                        let pad = "    ".repeat(self.vector_depth);
                        self.code.insert_str(at, &format!("{pad}{decl}\n"));
                    }
                    _ => self.line(&decl),
                }
                let per = wbytes / elem;
                let chunks = size / wbytes;
                let action = match &mut self.row_cache {
                    Some(rc) if self.branch_path.is_empty() && !b.shared => {
                        rc.action(&format!("{}@{base}", b.param), st, elem)
                    }
                    _ => Action::Global,
                };
                let copied = word == "uint4" && !b.shared && self.branch_path.is_empty();
                let global = |lw: &mut Self| {
                    for c in 0..chunks {
                        let at = base.clone().add(Ix::c((c * per) as i64));
                        // The row's copy in shared memory (next_row.rs).
                        if let Some(slot) = lw.next_row.as_mut().filter(|_| copied).and_then(|n| n.load(&b.param, &at, 16)) {
                            lw.line(&format!("*reinterpret_cast<uint4*>(&{a}[{}]) = {slot};", c * per));
                            continue;
                        }
                        let src = format!("reinterpret_cast<const {word}*>(&{}[{at}])", b.param);
                        let src = if b.shared || lw.load_fn.is_empty() {
                            format!("*{src}")
                        } else {
                            format!("{}({src})", lw.load_fn)
                        };
                        lw.line(&format!(
                            "*reinterpret_cast<{word}*>(&{a}[{}]) = {src};",
                            c * per
                        ));
                    }
                };
                // A row kept in shared memory (row_cache.rs): the slot is
                // indexed by the vector's position in the row, and positions
                // past `cap` (a prefix kept) read global memory.
                let var = self.row_cache.as_ref().map(|rc| rc.var.clone()).unwrap_or_default();
                let copy = |lw: &mut Self, slot: &str, to_slot: bool| {
                    for c in 0..chunks {
                        let s = format!("{slot}[{var} + {}]", c * per);
                        let r = format!("{a}[{}]", c * per);
                        let (dst, src) = if to_slot { (s, r) } else { (r, s) };
                        lw.line(&format!(
                            "*reinterpret_cast<{word}*>(&{dst}) = *reinterpret_cast<const {word}*>(&{src});"
                        ));
                    }
                };
                match action {
                    Action::Global => global(self),
                    Action::Store { slot, cap } => {
                        global(self);
                        if let Some(cap) = cap {
                            self.open(&format!("if ({var} < {cap}) {{"));
                        }
                        copy(self, &slot, true);
                        if cap.is_some() {
                            self.close("}");
                        }
                    }
                    Action::Load { slot, cap } => {
                        if let Some(cap) = cap {
                            self.open(&format!("if ({var} < {cap}) {{"));
                        }
                        copy(self, &slot, false);
                        if cap.is_some() {
                            self.close_open("} else {");
                            global(self);
                            self.close("}");
                        }
                    }
                }
                self.vector_loads.insert(key, a.clone());
                self.vector_words.push((v, a.clone(), word, chunks, per));
                a
            }
        };
        Some(ctype::from_storage(b.dtype, &format!("{arr}[{}]", l.lane)))
    }

    /// Whether comparing `i` with the constants `bounds` gives the same answer
    /// for every lane of a thread: `i` is the lane index (a multiple of the
    /// width plus the lane) and every bound is a multiple of the width.
    pub(super) fn lane_uniform(&self, i: &Ix, bounds: &[i64]) -> bool {
        let Some(l) = &self.lanes else { return true };
        let w = l.width as i64;
        match i.lane_step(&l.var, w) {
            Some(0) => true,
            Some(1) => {
                let (rest, k) = i.pull_lanes(&l.var, w).split_const();
                rest.multiple_of(w, &[&l.var])
                    && k.rem_euclid(w) == l.lane as i64
                    && bounds.iter().all(|b| b % w == 0)
            }
            _ => false,
        }
    }
}
