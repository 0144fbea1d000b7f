//! The next row copied to shared memory while the current one reduces, in a
//! row-wise kernel whose blocks walk many rows one after another (the fixed
//! grid of a backward norm, whose column sums stay in registers across
//! rows). Without it a block loads a row, waits for it, reduces it and
//! stores its outputs before the next row's loads start, so the memory
//! system idles behind every block's reductions; two blocks per
//! multiprocessor overlap only each other's. nvFuser's inner-outer kernel
//! stages rows in shared memory with `cp.async` for the same reason.
//!
//! Each 16-byte load of a row variable becomes a slot (and, at level 2,
//! each 4-byte load of one: a backward RMSNorm's saved reciprocal, whose
//! latency every row waited for): at the top of each iteration the thread
//! waits for its copies of the current row, issues the copies of the next
//! row into the other of two buffers (`fb_copy16`, `fb_copy4`), and the body
//! reads the current buffer where it loaded global memory. A thread reads
//! back only what it copied itself (slots are `[buffer][slot][thread]`), so
//! no barrier is needed, and consecutive threads touch consecutive words.
//! Copies cost no registers: holding the next row in registers instead would
//! have pushed a backward LayerNorm's 116 registers past the 128 that two
//! blocks of 256 threads allow.
//!
//! One buffer where two do not fit (only for a row re-read in each pass,
//! `walk::plan`, which needs the copy to re-read from): the next row's
//! copies are issued once the current row's last pass is done with the
//! buffer, at the end of the iteration, so they overlap only the other
//! blocks' work; what is gained is the re-read row's registers. Backward
//! norms of 6912 Float (two tensors, 56 KB a buffer at 352 threads) held
//! their rows at one block where two were planned, two waves; from one
//! buffer 0.93-0.98 of that time (H200, 4096-29696 rows), the RMSNorms of
//! 8192 at 512 threads 0.98-1.02.
//!
//! The kernel is lowered twice: a survey of the row loads, then the kernel
//! with their slots.

use crate::ix::Ix;

/// One copied load: its buffer, element of lane 0 and bytes (16 or 4).
type Slot = (String, Ix, usize);

pub struct NextRow {
    /// The loop body's row variables; a load that uses one is copied.
    rows: Vec<String>,
    /// Variables set before the loop (a thread's columns) that a copied
    /// load may use besides the row variables; a load using any other (a
    /// gather index loaded in the body) is not copied.
    pub known: Vec<String>,
    /// Whether 4-byte loads are copied too.
    scalars: bool,
    /// Survey: slots are recorded, not used.
    survey: bool,
    /// In first-seen order.
    slots: Vec<Slot>,
    /// Threads of the block.
    block: usize,
    /// Buffers: 2, the next row copied as the current one reduces; 1, as
    /// the current one ends.
    buffers: usize,
}

impl NextRow {
    /// A survey of the loads that read any of `rows`: 16-byte ones, and
    /// 4-byte ones too with `scalars`.
    pub fn survey(rows: &[String], block: usize, scalars: bool) -> NextRow {
        NextRow {
            rows: rows.to_vec(),
            known: Vec::new(),
            scalars,
            survey: true,
            slots: Vec::new(),
            block,
            buffers: 2,
        }
    }

    /// After a survey: the kernel with slots, when there are vectors to copy
    /// and both buffers fit `budget` bytes, or with `one` a single buffer
    /// does.
    pub fn plan(mut self, budget: usize, one: bool) -> Option<NextRow> {
        if self.count(16) == 0 {
            return None;
        }
        if self.bytes() > budget {
            if !one {
                return None;
            }
            self.buffers = 1;
            if self.bytes() > budget {
                return None;
            }
        }
        self.survey = false;
        Some(self)
    }

    /// Whether the plan has one buffer, refilled as each row ends.
    pub fn single(&self) -> bool {
        self.buffers == 1
    }

    /// Whether this is a plan (its loads read the copies), not a survey.
    pub fn planned(&self) -> bool {
        !self.survey
    }

    /// Shared memory of the buffers, bytes.
    pub fn bytes(&self) -> usize {
        self.buffers * self.block * (16 * self.count(16) + 4 * self.count(4))
    }

    /// Slots of `bytes` per buffer.
    pub fn count(&self, bytes: usize) -> usize {
        self.slots.iter().filter(|s| s.2 == bytes).count()
    }

    /// The slots' arrays, in dynamic shared memory (`bytes` of it): a
    /// re-read row of 11008 bf16 in two tensors takes 88 KB in two buffers,
    /// past the 48 KB of static shared memory a block may have.
    pub fn declarations(&self) -> Vec<String> {
        let mut d = vec!["extern __shared__ __align__(16) uint4 fb_next[];".to_string()];
        if self.count(4) > 0 {
            d.push(format!(
                "unsigned* const fb_next4 = reinterpret_cast<unsigned*>(fb_next + {});",
                self.buffers * self.count(16) * self.block
            ));
        }
        d
    }

    /// A load of `bytes` (16 or 4) of `param` at element `at`: in a survey,
    /// recorded when it reads a row variable; in the kernel, the read of its
    /// slot in the current buffer (a `uint4` or `unsigned`) when it has one.
    pub fn load(&mut self, param: &str, at: &Ix, bytes: usize) -> Option<String> {
        if !(bytes == 16 || bytes == 4 && self.scalars)
            || !self.rows.iter().any(|r| at.uses(r))
            || !self.only_known(at)
        {
            return None;
        }
        let key = (param.to_string(), at.clone(), bytes);
        let known = self.slots.contains(&key);
        if self.survey {
            if !known {
                self.slots.push(key);
            }
            return None;
        }
        known.then(|| self.slot(&key, "fb_nb"))
    }

    fn only_known(&self, at: &Ix) -> bool {
        match at {
            Ix::Const(_) => true,
            Ix::Var(n) => self.rows.contains(n) || self.known.contains(n),
            Ix::Add(ts) => ts.iter().all(|t| self.only_known(t)),
            Ix::Mul(x, _) | Ix::Div(x, _) | Ix::Mod(x, _) => self.only_known(x),
        }
    }

    /// The slot of `key` in buffer `buffer` (a C expression).
    fn slot(&self, key: &Slot, buffer: &str) -> String {
        let bytes = key.2;
        let k = self.slots.iter().filter(|s| s.2 == bytes).position(|s| s == key).unwrap_or(0);
        let name = if bytes == 16 { "fb_next" } else { "fb_next4" };
        format!("{name}[({buffer} * {} + {k}) * {} + threadIdx.x]", self.count(bytes), self.block)
    }

    /// The copies of the row whose row variables are `next` (one per row
    /// variable, in order) into buffer `buffer` (a C expression).
    pub fn copies(&self, next: &[String], buffer: &str) -> Vec<String> {
        self.slots
            .iter()
            .map(|key| {
                let (param, at, bytes) = key;
                let at = self
                    .rows
                    .iter()
                    .zip(next)
                    .fold(at.clone(), |at, (r, n)| at.subst(r, &Ix::var(n.clone())));
                format!("fb_copy{bytes}(&{}, &{param}[{at}]);", self.slot(key, buffer))
            })
            .collect()
    }
}
