//! Kernel-only device time from CUPTI activity records (the concurrent-kernel
//! kind), the way NVIDIA's own benchmark utilities take it. Memsets and
//! copies are recorded as their own kind and never added to kernel time.
//!
//! CUPTI hands records back through process-wide callbacks, so one session
//! at a time: `Cupti::start` refuses a second.

use crate::error::RuntimeError;
use cudarc::cupti::result::activity;
use cudarc::cupti::sys::{self, CUptiResult, CUpti_ActivityKind};
use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// One finished activity: a kernel, or a memset/copy (which timing skips).
#[derive(Clone, Debug, PartialEq)]
pub struct Activity {
    pub kind: ActivityKind,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub correlation_id: u32,
    pub stream_id: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    /// A kernel's registers per thread and shared memory per block (static
    /// plus dynamic) as CUPTI recorded its launch; 0 for other activities.
    pub registers: u32,
    pub shared_bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityKind {
    Kernel,
    Memset,
    Memcpy,
}

impl Activity {
    /// The kernel's name and launch shape (grid then block): what a sample's
    /// records are checked against.
    pub fn launch(&self) -> (String, [u32; 6]) {
        let (g, b) = (self.grid, self.block);
        (
            self.name.clone(),
            [g[0], g[1], g[2], b[0], b[1], b[2]].map(|x| x.max(0) as u32),
        )
    }

    /// Its duration; a record whose end precedes its start reads as zero here and is
    /// rejected by whoever checks a sample's records.
    pub fn duration_us(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e3
    }
}

const BUFFER_SIZE: usize = 8 * 1024 * 1024;
const BUFFER_ALIGN: usize = 8;

static RECORDS: Mutex<Vec<Activity>> = Mutex::new(Vec::new());
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Records CUPTI dropped since the last `take` (its own count, read as each buffer
/// completes, plus any record that could not be read): a sample taken then is incomplete.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Every activity finished since the last `take`, and how many CUPTI dropped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Records {
    pub activities: Vec<Activity>,
    pub dropped: u64,
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let layout = Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN).expect("a valid layout");
    // SAFETY: CUPTI passes valid out-pointers; the buffer is freed in buffer_completed.
    unsafe {
        *buffer = alloc(layout);
        *size = if (*buffer).is_null() { 0 } else { BUFFER_SIZE };
        *max_records = 0;
    }
}

extern "C" fn buffer_completed(
    ctx: cudarc::driver::sys::CUcontext,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let mut dropped = 0usize;
    // SAFETY: CUPTI's own count for the context and stream this buffer served.
    let r = unsafe { sys::cuptiActivityGetNumDroppedRecords(ctx, stream, &mut dropped) };
    if r == CUptiResult::CUPTI_SUCCESS && dropped > 0 {
        DROPPED.fetch_add(dropped as u64, Ordering::SeqCst);
    }
    if buffer.is_null() {
        return;
    }
    let mut found = Vec::new();
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: `buffer` holds `valid` bytes of records written by CUPTI.
        match unsafe { activity::get_next_record(buffer, valid, &mut record) } {
            Ok(()) => {
                // SAFETY: every record starts with its kind.
                let kind = unsafe { (*record).kind };
                if let Some(a) = unsafe { parse(record, kind) } {
                    found.push(a);
                }
            }
            Err(e) if e.0 == CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED => break,
            Err(_) => {
                DROPPED.fetch_add(1, Ordering::SeqCst);
                break;
            }
        }
    }
    RECORDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(found);
    let layout = Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN).expect("a valid layout");
    // SAFETY: allocated in buffer_requested with the same layout.
    unsafe { dealloc(buffer, layout) };
}

impl Activity {
    /// A memset or copy: timestamps and ids, no launch shape.
    pub fn transfer(
        kind: ActivityKind,
        name: &str,
        start_ns: u64,
        end_ns: u64,
        correlation_id: u32,
        stream_id: u32,
    ) -> Activity {
        Activity {
            kind,
            name: name.into(),
            start_ns,
            end_ns,
            correlation_id,
            stream_id,
            grid: [0; 3],
            block: [0; 3],
            registers: 0,
            shared_bytes: 0,
        }
    }
}

/// Reads the fields every kernel-record version shares (new versions only
/// append fields), and the memset/copy timestamps.
unsafe fn parse(record: *const sys::CUpti_Activity, kind: CUpti_ActivityKind) -> Option<Activity> {
    match kind {
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
        | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => {
            let k = &*(record as *const sys::CUpti_ActivityKernel10);
            let name = if k.name.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(k.name)
                    .to_string_lossy()
                    .into_owned()
            };
            Some(Activity {
                kind: ActivityKind::Kernel,
                name,
                start_ns: k.start,
                end_ns: k.end,
                correlation_id: k.correlationId,
                stream_id: k.streamId,
                grid: [k.gridX, k.gridY, k.gridZ],
                block: [k.blockX, k.blockY, k.blockZ],
                registers: k.registersPerThread as u32,
                shared_bytes: (k.staticSharedMemory as u32).saturating_add(k.dynamicSharedMemory.max(0) as u32),
            })
        }
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => {
            let m = &*(record as *const sys::CUpti_ActivityMemset4);
            Some(Activity::transfer(
                ActivityKind::Memset,
                "memset",
                m.start,
                m.end,
                m.correlationId,
                m.streamId,
            ))
        }
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => {
            let m = &*(record as *const sys::CUpti_ActivityMemcpy6);
            Some(Activity::transfer(
                ActivityKind::Memcpy,
                "memcpy",
                m.start,
                m.end,
                m.correlationId,
                m.streamId,
            ))
        }
        _ => None,
    }
}

const KINDS: [CUpti_ActivityKind; 3] = [
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
];

/// An active CUPTI activity session; disabled when dropped.
pub struct Cupti(());

fn err(what: &str, e: impl std::fmt::Debug) -> RuntimeError {
    RuntimeError::Invalid(format!("CUPTI {what}: {e:?}"))
}

impl Cupti {
    /// Starts recording kernels, memsets and copies, or says why not (CUPTI
    /// (libcupti.so.13 / .12) absent, or a session already active).
    pub fn start() -> Result<Cupti, RuntimeError> {
        // SAFETY: only asks the loader whether the library is there.
        if !unsafe { sys::is_culib_present() } {
            return Err(RuntimeError::Invalid(
                "CUPTI (libcupti.so.13 / .12) not found".into(),
            ));
        }
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(RuntimeError::Invalid(
                "a CUPTI session is already active in this process".into(),
            ));
        }
        let started = std::panic::catch_unwind(|| -> Result<(), RuntimeError> {
            activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
                .map_err(|e| err("callbacks", e))?;
            for k in KINDS {
                activity::enable(k).map_err(|e| err("enable", e))?;
            }
            Ok(())
        });
        match started {
            Ok(Ok(())) => Ok(Cupti(())),
            Ok(Err(e)) => {
                ACTIVE.store(false, Ordering::SeqCst);
                Err(e)
            }
            Err(_) => {
                ACTIVE.store(false, Ordering::SeqCst);
                Err(RuntimeError::Invalid(
                    "CUPTI panicked while starting".into(),
                ))
            }
        }
    }

    /// Every activity finished since the last call (the GPU's work must be
    /// synchronized first), with the number of records CUPTI dropped meanwhile:
    /// whoever reads them decides that a sample with dropped records is incomplete.
    pub fn take(&self) -> Result<Records, RuntimeError> {
        // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1: hand back partly filled buffers too.
        activity::flush_all(1).map_err(|e| err("flush", e))?;
        let mut global = 0usize;
        // SAFETY: the count of records dropped from buffers not tied to a context.
        let r =
            unsafe { sys::cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut global) };
        let dropped = DROPPED.swap(0, Ordering::SeqCst)
            + if r == CUptiResult::CUPTI_SUCCESS {
                global as u64
            } else {
                0
            };
        Ok(Records {
            activities: std::mem::take(&mut *RECORDS.lock().unwrap_or_else(|p| p.into_inner())),
            dropped,
        })
    }
}

impl Cupti {
    /// Stops recording until `resume`: work done meanwhile runs as it would
    /// without CUPTI (whose tracing slows some kernels measurably), and its
    /// records, and any not yet taken, are dropped.
    pub fn pause(&self) -> Result<(), RuntimeError> {
        for k in KINDS {
            activity::disable(k).map_err(|e| err("disable", e))?;
        }
        activity::flush_all(1).map_err(|e| err("flush", e))?;
        RECORDS.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(())
    }

    /// Records again after `pause`.
    pub fn resume(&self) -> Result<(), RuntimeError> {
        for k in KINDS {
            activity::enable(k).map_err(|e| err("enable", e))?;
        }
        Ok(())
    }
}

impl Drop for Cupti {
    fn drop(&mut self) {
        for k in KINDS {
            let _ = activity::disable(k);
        }
        let _ = activity::flush_all(1);
        RECORDS.lock().unwrap_or_else(|p| p.into_inner()).clear();
        ACTIVE.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_cupti_is_a_reason_not_a_panic() {
        match super::Cupti::start() {
            Ok(c) => {
                assert!(super::Cupti::start().is_err(), "one session at a time");
                drop(c);
            }
            Err(e) => eprintln!("skipped (no CUPTI here): {e}"),
        }
    }
}
