//! Rows kept in shared memory between the passes of a loop-schedule kernel
//! (persistent.rs). A row too long for the registers was read from global
//! memory once per pass, and with a block per row and four rows live per
//! multiprocessor the re-reads outgrew the L2 and went back to DRAM (softmax
//! bf16 2048x32064 at 47% of the copy ceiling, three reads of each row).
//! Here the first pass that reads a vector also stores it to shared memory
//! and later passes read it from there.
//!
//! Every pass walks the row with the same threads at the same positions, so a
//! thread reads back only what it wrote itself: no barrier is needed. A slot
//! is keyed by the load (buffer and offset expression, the same text in every
//! pass) and indexed by the vector's position in the row, so two loads of
//! one input at different offsets get slots of their own.
//!
//! `ValueCache` keeps computed values the same way (a dropout's masked sum,
//! whose random draws cost more than a slot), ahead of the loads.
//!
//! The kernel is lowered twice: a survey finds the wide loads each pass does,
//! then the loads seen in two passes or more get slots, as much of each row
//! as the budget holds (a prefix, where the whole row does not fit).

use crate::ix::Ix;
use fusebench_ir::ValueId;
use std::collections::{BTreeMap, BTreeSet};

/// What a wide load does with the cache.
pub enum Action {
    /// A plain global load.
    Global,
    /// A global load, then a store of the vector to `slot` (an array of the
    /// storage type) at the row position, for positions below `cap` (None:
    /// the whole row).
    Store { slot: String, cap: Option<usize> },
    /// Read from `slot` for positions below `cap`, from global memory above.
    Load { slot: String, cap: Option<usize> },
}

/// A wide load seen by the survey: the passes it was done in, the bytes of
/// an element and the storage type's C name.
type Seen = (BTreeSet<usize>, usize, String);

struct Slot {
    offset: usize,
    first_pass: usize,
    storage: String,
}

pub struct RowCache {
    /// The loop being written: passes 0.., then the outputs' loop.
    pub pass: usize,
    /// The row-local position of a thread's vector (persistent.rs's `ii`).
    pub var: String,
    /// Survey: the passes each load was seen in, and its bytes per element.
    seen: Option<BTreeMap<String, Seen>>,
    slots: BTreeMap<String, Slot>,
    cap: usize,
    row: usize,
    total: usize,
}

impl RowCache {
    /// A cache that only records which loads each pass does.
    pub fn survey(var: &str) -> RowCache {
        RowCache {
            pass: 0,
            var: var.into(),
            seen: Some(BTreeMap::new()),
            slots: BTreeMap::new(),
            cap: 0,
            row: 0,
            total: 0,
        }
    }

    /// After a survey: slots for the loads seen in two passes or more, each
    /// holding the first `cap` elements of a row of `row`, where `cap` is the
    /// most that `budget` bytes hold, rounded down to a multiple of `step`
    /// (the elements a block reads per loop iteration). None when nothing is
    /// re-read or not even one iteration fits.
    pub fn plan(self, row: usize, step: usize, budget: usize, base: usize) -> Option<RowCache> {
        let seen = self.seen?;
        let reread: Vec<_> = seen
            .into_iter()
            .filter(|(_, (passes, _, _))| passes.len() >= 2)
            .collect();
        let per_elem: usize = reread.iter().map(|(_, (_, bytes, _))| bytes).sum();
        if per_elem == 0 {
            return None;
        }
        let cap = if row * per_elem <= budget {
            row
        } else {
            budget / per_elem / step * step
        };
        if cap == 0 {
            return None;
        }
        let mut slots = BTreeMap::new();
        let mut offset = base;
        for (key, (passes, bytes, storage)) in reread {
            let first_pass = *passes.iter().next().unwrap();
            slots.insert(key, Slot { offset, first_pass, storage });
            // Each slot starts 16-byte aligned, for the widest vector.
            offset += (cap * bytes).div_ceil(16) * 16;
        }
        Some(RowCache {
            pass: 0,
            var: self.var,
            seen: None,
            slots,
            cap,
            row,
            total: offset,
        })
    }

    /// Dynamic shared memory up to the end of the last slot, bytes (the
    /// `base` before the first included).
    pub fn bytes(&self) -> usize {
        self.total
    }

    /// The first elements of each row that are cached.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// What the wide load `key` (buffer and offset text) of `storage`
    /// elements of `bytes` each does in the current pass.
    pub fn action(&mut self, key: &str, storage: &str, bytes: usize) -> Action {
        let pass = self.pass;
        if let Some(seen) = &mut self.seen {
            seen.entry(key.to_string())
                .or_insert_with(|| (BTreeSet::new(), bytes, storage.to_string()))
                .0
                .insert(pass);
            return Action::Global;
        }
        let Some(s) = self.slots.get(key) else {
            return Action::Global;
        };
        let slot = format!(
            "reinterpret_cast<{}*>(fb_rcache + {})",
            s.storage, s.offset
        );
        let cap = (self.cap < self.row).then_some(self.cap);
        if s.first_pass == pass {
            Action::Store { slot, cap }
        } else if s.first_pass < pass {
            Action::Load { slot, cap }
        } else {
            Action::Global
        }
    }
}

/// Values of a row that the first pass computes and later passes read again,
/// kept in shared memory rather than computed again: a dropout's masked sum,
/// whose random draws cost more than the loads (dropout + residual + norm
/// bf16 2048x16384 took 146 us with its inputs kept, bound by instructions;
/// nvFuser holds the row in registers and draws once). Laid out lane by lane
/// (`[lane][vector]`), so consecutive threads touch consecutive words.
#[derive(Clone)]
pub struct ValueCache {
    /// Each value, the byte offset of its slot and its register type.
    values: Vec<(ValueId, usize, &'static str)>,
    /// Vectors per row and elements per vector.
    vectors: usize,
    width: usize,
    var: String,
    /// The element the lane being written computes (its index before the
    /// lanes are pulled out) and the lane.
    pub at: Option<(Vec<Ix>, usize)>,
    /// Later passes read the slots; the first stores them.
    pub reading: bool,
    stored: BTreeSet<(ValueId, usize)>,
    /// Reads served, counted so that a survey can tell an unused cache.
    pub reads: usize,
    /// Bytes the slots take, each padded to 16.
    total: usize,
}

impl ValueCache {
    /// Slots for `values` (each of register type `ty`, `bytes` wide) over
    /// rows of `row` elements read `width` at a time by variable `var`.
    pub fn new(values: &[(ValueId, &'static str, usize)], row: usize, width: usize, var: &str) -> ValueCache {
        let mut offset = 0;
        let values = values
            .iter()
            .map(|&(v, ty, bytes)| {
                let at = offset;
                offset += (row * bytes).div_ceil(16) * 16;
                (v, at, ty)
            })
            .collect();
        ValueCache {
            values,
            vectors: row / width,
            width,
            var: var.into(),
            at: None,
            reading: false,
            stored: BTreeSet::new(),
            reads: 0,
            total: offset,
        }
    }

    /// Bytes of shared memory the slots take (they come first).
    pub fn bytes(&self) -> usize {
        self.total
    }

    fn element(&self, v: ValueId, lane: usize) -> Option<String> {
        let &(_, at, ty) = self.values.iter().find(|(x, _, _)| *x == v)?;
        Some(format!(
            "reinterpret_cast<{ty}*>(fb_rcache + {at})[{lane} * {} + {} / {}]",
            self.vectors, self.var, self.width
        ))
    }

    /// The read of `v` at the lane being written, when `v` is kept.
    pub fn read(&mut self, v: ValueId) -> Option<String> {
        if !self.reading {
            return None;
        }
        let lane = self.at.as_ref()?.1;
        let e = self.element(v, lane)?;
        self.reads += 1;
        Some(e)
    }

    /// The statement that stores `v`'s value `expr` at the lane being
    /// written, once per lane of a loop body.
    pub fn store(&mut self, v: ValueId, expr: &str) -> Option<String> {
        if self.reading {
            return None;
        }
        let lane = self.at.as_ref()?.1;
        let e = self.element(v, lane)?;
        self.stored.insert((v, lane)).then(|| format!("{e} = {expr};"))
    }

    /// A new loop body: every lane stores again.
    pub fn new_body(&mut self) {
        self.stored.clear();
    }
}
