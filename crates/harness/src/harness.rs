//! The harness: one loop that takes samples of a subject, or of a program of
//! subjects run step after step, under a cache policy, by a method, until a
//! stopping rule stops, reading the clocks after every step and turning the
//! runs into records.

use crate::method::{self, Choice, Method, Step};
use crate::policy;
use crate::subject::{KernelFacts, Launch, Subject};
use crate::{clocks, HarnessError};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use fusebench_measure::{
    sample_steps, CachePolicy, Environment, FixedCount, KernelRecord, Measurement, Run, Sample,
    Sibling, StoppingRule, Taken,
};
use fusebench_runtime::{ClockReader, Gpu, Kernel};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub struct Harness {
    gpu: Gpu,
    method: Box<dyn Method>,
    clocks: Option<ClockReader>,
    environment: Environment,
    copy: OnceLock<Kernel>,
    /// What the caller should tell the user: a method fallen back to, clocks not read.
    pub notes: Vec<String>,
}

/// How to measure.
pub struct Options<'a> {
    pub cache: CachePolicy,
    /// Runs before the samples, not kept (the last one sets the kernels a call must launch).
    pub warmup: usize,
    pub rule: &'a dyn StoppingRule,
    /// Where it ran, for the record ("program P, fusion i of n"); standalone when `None`.
    pub context: Option<String>,
    /// Also time a copy of the subject's bytes the same way, for the record's `ceiling`.
    pub ceiling: bool,
    /// Also time the subject briefly under its own and the other cache policy by
    /// both methods (every combination but its own), for the record's `siblings`.
    pub siblings: bool,
    /// How a cold sample flushes L2; FUSEBENCH_FLUSH's where `None`. The record's
    /// `cold_setup` says which.
    pub flush: Option<fusebench_knobs::Flush>,
}

/// Samples of a sibling measurement: enough for its median to be known well
/// within the differences `explain` splits, few enough to cost little.
const SIBLING_SAMPLES: usize = 30;

/// A record and how long its sampling took.
pub struct Measured {
    pub record: Measurement,
    pub elapsed: Duration,
}

impl Harness {
    /// A harness on `gpu` with the method asked for; NVML's clock reader where it loads.
    pub fn new(gpu: Gpu, choice: Choice) -> Result<Harness, HarnessError> {
        fusebench_knobs::get()?;
        let (method, note) = method::start(choice)?;
        let mut notes: Vec<String> = note.into_iter().collect();
        let clocks = match ClockReader::new(0) {
            Ok(c) => Some(c),
            Err(reason) => {
                notes.push(format!("samples carry no clock readings: {reason}"));
                None
            }
        };
        Ok(Harness {
            environment: clocks::environment(gpu.info()),
            gpu,
            method,
            clocks,
            copy: OnceLock::new(),
            notes,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn method(&self) -> fusebench_measure::Method {
        self.method.kind()
    }

    pub fn environment(&self) -> &Environment {
        &self.environment
    }

    pub(crate) fn copy_kernel(&self) -> Result<Kernel, HarnessError> {
        if let Some(k) = self.copy.get() {
            return Ok(k.clone());
        }
        let k = self
            .gpu
            .compile(crate::ceiling::COPY_KERNEL, &["fb_copy"])?
            .function("fb_copy")?;
        Ok(self.copy.get_or_init(|| k).clone())
    }

    /// One subject measured alone; with `siblings`, then briefly under the other
    /// cache policy and by the other method (every combination but its own).
    pub fn measure(&self, s: &dyn Subject, o: &Options) -> Result<Measured, HarnessError> {
        let mut m = self.measure_steps(&[s], o)?.remove(0);
        if o.siblings {
            m.record.siblings = self.siblings(s, o)?;
        }
        Ok(m)
    }

    /// The siblings of a measurement of `s` under `o`: 30 samples each. An events
    /// sibling is timed with CUPTI paused (CUPTI's tracing slows some kernels: an
    /// events time beside CUPTI is not what an events run gives); a CUPTI sibling
    /// of an events harness needs a CUPTI session of its own and is left out where
    /// none starts. A call cannot be timed by events.
    fn siblings(&self, s: &dyn Subject, o: &Options) -> Result<Vec<Sibling>, HarnessError> {
        use fusebench_measure::Method as M;
        let rule = FixedCount(SIBLING_SAMPLES);
        let mut out = Vec::new();
        let caches = std::iter::once(o.cache).chain(policy::siblings(o.cache).iter().copied());
        for cache in caches {
            for method in [M::Cupti, M::CudaEvents] {
                if (cache, method) == (o.cache, self.method.kind()) {
                    continue;
                }
                let opts = Options {
                    cache,
                    warmup: 2,
                    rule: &rule,
                    context: o.context.clone(),
                    ceiling: false,
                    siblings: false,
                    flush: o.flush,
                };
                let measured = if method == self.method.kind() {
                    self.measure_steps_with(self.method.as_ref(), &[s], &opts)?
                } else if method == M::CudaEvents {
                    if s.launches().is_none() {
                        continue;
                    }
                    self.method.pause()?;
                    let r = self.measure_steps_with(&method::Events, &[s], &opts);
                    self.method.resume()?;
                    r?
                } else {
                    match method::CuptiMethod::start() {
                        Ok(c) => self.measure_steps_with(&c, &[s], &opts)?,
                        Err(_) => continue,
                    }
                };
                out.push(Sibling::of(&measured[0].record));
            }
        }
        Ok(out)
    }

    /// A program: `subjects` run in order, step after step; each subject's
    /// sample is its time in a step, and each stops on its own samples. One
    /// subject is a program of one.
    pub fn measure_steps(
        &self,
        subjects: &[&dyn Subject],
        o: &Options,
    ) -> Result<Vec<Measured>, HarnessError> {
        self.measure_steps_with(self.method.as_ref(), subjects, o)
    }

    fn measure_steps_with(
        &self,
        method: &dyn Method,
        subjects: &[&dyn Subject],
        o: &Options,
    ) -> Result<Vec<Measured>, HarnessError> {
        if subjects.is_empty() {
            return Err(HarnessError::Usage("nothing to measure".into()));
        }
        let expected: Vec<Option<Vec<Launch>>> = subjects.iter().map(|s| s.launches()).collect();
        let calls = expected.iter().filter(|e| e.is_none()).count();
        if calls > 0 && subjects.len() > 1 {
            return Err(HarnessError::Usage(
                "a call is measured on its own, not in a program".into(),
            ));
        }
        if calls > 0 && !method.times_calls() {
            return Err(HarnessError::Usage(format!(
                "{} cannot time a call that launches on streams fusebench does not own; use CUPTI",
                method.kind().name()
            )));
        }
        let policy = policy::of(o.cache, o.flush);
        let placements = subjects
            .iter()
            .map(|s| policy.placements(&self.gpu, *s))
            .collect::<Result<Vec<usize>, _>>()?;
        // Events around the subject: the events method's time, and beside
        // CUPTI's a cross-check (`events_us`) unless FUSEBENCH_EVENTS=0.
        let with_events = method.kind() != fusebench_measure::Method::Cupti || fusebench_knobs::get()?.events;
        let events = if with_events {
            self.events(&expected)?
        } else {
            expected.iter().map(|_| Vec::new()).collect()
        };
        let ctx = self.gpu.cuda_context();
        let stream = self.gpu.cuda_stream();
        let record = |e: Option<&CudaEvent>| match e {
            Some(e) => e
                .record(stream)
                .map_err(|e| HarnessError::driver("recording an event", e)),
            None => Ok(()),
        };
        // Records of earlier work (uploads, placements, other measurements) are not these.
        self.gpu.synchronize()?;
        method.discard()?;
        // A call's kernels: set by its last warm-up run, then every sample's must match.
        let mut reference: Option<Vec<Launch>> = None;
        // Per subject, what CUPTI recorded of its kernels' launches in the last step.
        let mut recorded: Vec<Vec<KernelFacts>> = vec![Vec::new(); subjects.len()];
        let runs = sample_steps(subjects.len(), o.warmup, o.rule, |step| {
            policy.before_step(&self.gpu)?;
            for (i, s) in subjects.iter().enumerate() {
                policy.before_subject(&self.gpu, *s, step)?;
                match &expected[i] {
                    Some(launches) => {
                        record(events[i].first())?;
                        for k in 0..launches.len() {
                            s.launch(k)?;
                            record(events[i].get(k + 1))?;
                        }
                    }
                    None => {
                        let sync = || {
                            ctx.synchronize()
                                .map_err(|e| HarnessError::driver("synchronizing the context", e))
                        };
                        sync()?;
                        method.discard()?;
                        s.call()?;
                        sync()?;
                    }
                }
            }
            self.gpu.synchronize()?;
            let times = method.collect(&Step {
                expected: &expected,
                events: &events,
            })?;
            if calls > 0 {
                check_call(&times[0].launches, &mut reference, step < o.warmup)?;
            }
            for (r, t) in recorded.iter_mut().zip(&times) {
                if !t.facts.is_empty() {
                    *r = t.facts.clone();
                }
            }
            let clocks = clocks::read(self.clocks.as_ref());
            Ok::<_, HarnessError>(
                times
                    .into_iter()
                    .map(|t| Taken {
                        sample: Sample {
                            time_us: t.time_us,
                            clocks: clocks.clone(),
                            events_us: t.events_us,
                        },
                        kernels_us: t.kernels_us,
                    })
                    .collect(),
            )
        });
        for s in subjects {
            s.use_placement(0);
        }
        let runs = runs?;
        subjects
            .iter()
            .zip(runs)
            .zip(expected)
            .zip(placements)
            .zip(recorded)
            .map(|((((s, run), launches), placements), recorded)| {
                let launches = launches.or_else(|| reference.clone()).unwrap_or_default();
                let setup = policy.setup(&self.gpu, placements)?;
                let facts = merge_facts(s.kernel_facts(), recorded);
                self.record(method.kind(), *s, run, (&launches, &facts), setup, o)
            })
            .collect()
    }

    /// One event before each stream subject's first kernel and one after each of its kernels.
    fn events(
        &self,
        expected: &[Option<Vec<Launch>>],
    ) -> Result<Vec<Vec<CudaEvent>>, HarnessError> {
        let ctx = self.gpu.cuda_context();
        expected
            .iter()
            .map(|e| {
                let n = e.as_ref().map_or(0, |l| l.len() + 1);
                (0..n)
                    .map(|_| {
                        // Timing needs CU_EVENT_DEFAULT: cudarc's default (None) disables timing.
                        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                            .map_err(|e| HarnessError::driver("creating an event", e))
                    })
                    .collect()
            })
            .collect()
    }

    fn record(
        &self,
        method: fusebench_measure::Method,
        s: &dyn Subject,
        run: Run,
        (launches, facts): (&[Launch], &[KernelFacts]),
        setup: Option<String>,
        o: &Options,
    ) -> Result<Measured, HarnessError> {
        let kernels = kernel_records(launches, facts, &run.kernels_us);
        let taken_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut m = Measurement::new(
            s.identity(),
            method,
            o.cache,
            o.rule.describe(),
            run.stop,
            run.warmup,
            fusebench_measure::Environment { libraries: s.libraries(), ..self.environment.clone() },
            kernels,
            run.samples,
            taken_at,
        )?;
        m.stopping = Some(o.rule.spec());
        m.context = o.context.clone();
        m.device_bytes = s.device_bytes();
        if let Some((bytes, how)) = s.bytes() {
            m.bytes = Some(bytes);
            m.bytes_counted = Some(how);
            if o.ceiling && bytes > 0 {
                m.ceiling = Some(self.ceiling(bytes, o.cache, o.flush)?);
            }
        }
        m.knobs = s.knobs();
        if setup.is_some() {
            m.knobs.extend(
                fusebench_knobs::get()
                    .map(|k| k.affecting(&[fusebench_knobs::Affects::ColdSetup]))
                    .unwrap_or_default(),
            );
        }
        m.cold_setup = setup;
        Ok(Measured {
            record: m,
            elapsed: run.elapsed,
        })
    }
}

/// What the record says of each kernel: the subject's code hashes, with the
/// registers and shared memory CUPTI recorded for the launches measured
/// (the subject's own figures where CUPTI recorded none, under events).
fn merge_facts(subject: Vec<KernelFacts>, recorded: Vec<KernelFacts>) -> Vec<KernelFacts> {
    let n = subject.len().max(recorded.len());
    (0..n)
        .map(|k| {
            let mine = subject.get(k).cloned().unwrap_or_default();
            match recorded.get(k) {
                Some(r) => KernelFacts {
                    code_hash: mine.code_hash,
                    shared_bytes: r.shared_bytes,
                    registers: r.registers,
                },
                None => mine,
            }
        })
        .collect()
}

/// One record per kernel launched: its launch, what the subject says of it, and
/// the median of its times over the kept samples.
fn kernel_records(
    launches: &[Launch],
    facts: &[crate::KernelFacts],
    kernels_us: &[Vec<f64>],
) -> Vec<KernelRecord> {
    launches
        .iter()
        .enumerate()
        .map(|(k, (name, l))| {
            let f = facts.get(k).cloned().unwrap_or_default();
            KernelRecord {
                name: name.clone(),
                code_hash: f.code_hash,
                grid: [l[0], l[1], l[2]],
                block: [l[3], l[4], l[5]],
                shared_bytes: f.shared_bytes,
                registers: f.registers,
                median_us: kernels_us
                    .get(k)
                    .map_or(f64::NAN, |v| fusebench_measure::median(v)),
            }
        })
        .collect()
}

/// A call's kernels in one run: during warm-up they become the reference;
/// afterwards they must equal it, or the sample is rejected.
fn check_call(
    launches: &[Launch],
    reference: &mut Option<Vec<Launch>>,
    warming_up: bool,
) -> Result<(), HarnessError> {
    if launches.is_empty() {
        return Err(HarnessError::Incomplete(
            "the call launched no kernel on the GPU (CUPTI recorded none in it)".into(),
        ));
    }
    match reference {
        Some(r) if !warming_up => {
            if r.as_slice() != launches {
                return Err(HarnessError::Incomplete(format!(
                    "{} (the kernels of the last warm-up run against this sample's); the sample is rejected, not summed",
                    crate::complete::mismatch(r, launches)
                )));
            }
        }
        _ => *reference = Some(launches.to_vec()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_call, kernel_records, merge_facts};
    use crate::KernelFacts;

    #[test]
    fn registers_come_from_cupti_where_it_recorded_them() {
        let mine = |r| KernelFacts { code_hash: "h".into(), shared_bytes: 0, registers: r };
        let cupti = |r| KernelFacts { code_hash: String::new(), shared_bytes: 512, registers: r };
        // A fusion: its code hash, CUPTI's registers and shared memory.
        let got = merge_facts(vec![mine(32)], vec![cupti(40)]);
        assert_eq!(got, vec![KernelFacts { code_hash: "h".into(), shared_bytes: 512, registers: 40 }]);
        // A Python callable: the subject knows nothing, CUPTI does.
        assert_eq!(merge_facts(vec![], vec![cupti(72), cupti(16)]).iter().map(|k| k.registers).collect::<Vec<_>>(), [72, 16]);
        // Under events nothing was recorded: the subject's figures stay.
        assert_eq!(merge_facts(vec![mine(32)], vec![]), vec![mine(32)]);
    }

    #[test]
    fn a_kernel_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let launches = vec![
            ("a".to_string(), [2, 1, 1, 64, 1, 1]),
            ("b".to_string(), [4, 1, 1, 64, 1, 1]),
        ];
        let k = kernel_records(
            &launches,
            &[],
            &[vec![4.0, 1.0, 3.0, 2.0], vec![5.0, 7.0, 6.0]],
        );
        assert_eq!(k[0].median_us, 2.5);
        assert_eq!(k[1].median_us, 6.0);
        assert_eq!((k[1].grid, k[1].block), ([4, 1, 1], [64, 1, 1]));
        assert_eq!(k[0].code_hash, "", "a call's kernels have no code hash");
    }

    #[test]
    fn a_call_must_launch_what_its_last_warm_up_launched() {
        let a = vec![("k1".to_string(), [1, 1, 1, 32, 1, 1])];
        let b = vec![("k2".to_string(), [1, 1, 1, 32, 1, 1])];
        let mut r = None;
        check_call(&b, &mut r, true).unwrap();
        check_call(&a, &mut r, true).unwrap();
        assert_eq!(
            r.as_ref(),
            Some(&a),
            "the last warm-up run sets the kernels"
        );
        check_call(&a, &mut r, false).unwrap();
        let e = check_call(&b, &mut r, false).unwrap_err().to_string();
        assert!(e.contains("rejected"), "{e}");
        assert!(check_call(&[], &mut r, false).is_err(), "no kernel at all");
        // Without warm-up, the first sample sets them.
        let mut r = None;
        check_call(&b, &mut r, false).unwrap();
        assert_eq!(r, Some(b));
    }
}
