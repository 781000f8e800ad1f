//! Criterion benchmark of the Rust core, without Python: the cases of
//! `benches/cases.txt` (the Python benchmarks' too), with fewer indices where
//! a case's output would be hundreds of MiB, so that kernel changes can be
//! measured in seconds.
//!
//! ```sh
//! cargo bench --bench core                        # every case, 1 thread and all threads
//! cargo bench --bench core -- points_2m           # one case (a criterion filter)
//! cargo bench --bench core -- 'rows_1m_256b/before_writing/1t' # one case, out=, one thread
//! ```
//!
//! Each benchmark is one call as the bindings make it: plan (shape checks,
//! the walk) plus `Plan::execute` into a warm output buffer of exactly the
//! result's size. `while_copying` is the path of a call returning a new
//! array (`Validation::WhileCopying`: indices validated while copying),
//! `before_writing` the path of `out=` (`Validation::BeforeWriting`: every
//! index validated before the output is written). Benchmark ids are
//! `case/path/threads`, with threads 1 and `ndgather::num_threads()` (every
//! CPU). Throughput is the output's bytes per second.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndgather::{plan_gather, plan_gather_nd, ArrayView, IndexType, Mode, Plan, Validation};
use ndgather_oracle::SplitMix64;

#[derive(Clone, Copy)]
enum Op {
    GatherNd { batch_dims: i64 },
    Gather { axis: i64, batch_dims: i64 },
}

struct Case {
    name: String,
    op: Op,
    data_shape: Vec<usize>,
    indices_shape: Vec<usize>,
    itemsize: usize,
}

/// The cases of `benches/cases.txt` (its header says the format), which the
/// Python benchmarks read too; data is a counting pattern of the case's
/// itemsize.
fn cases() -> Vec<Case> {
    include_str!("cases.txt")
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(Case::parse)
        .collect()
}

/// An empty buffer with room for `n` bytes, on 2 MiB pages where it is
/// large, as NumPy allocates the arrays the Python benchmarks gather from
/// and into (it asks for huge pages from 4 MiB on; where transparent huge
/// pages are `madvise` only, a plain `Vec` gets 4 KiB pages). Without it a
/// case of random rows of a large table measured page walks NumPy's users
/// never pay: `ov_gnd8_xml1` on one thread took 26 us here against 14.75 us
/// from Python (docs/performance.md, tuning log).
fn numpy_like(n: usize) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if n >= 2 * HUGE {
            let start = v.as_mut_ptr();
            let lead = start.align_offset(HUGE);
            let len = (n - lead) / HUGE * HUGE;
            // SAFETY: madvise only gives the kernel a hint about pages of
            // this allocation (the whole huge pages inside its `n` bytes),
            // which nothing else uses; a failure is harmless and ignored.
            unsafe { libc::madvise(start.add(lead).cast(), len, libc::MADV_HUGEPAGE) };
        }
    }
    v
}

/// A number in `0..n` from the seeded sequence.
fn below(rng: &mut SplitMix64, n: usize) -> i64 {
    (rng.next() % n as u64) as i64
}

fn c_strides(shape: &[usize], itemsize: usize) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut step = itemsize as isize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step *= n.max(1) as isize;
    }
    strides
}

/// The case's arrays: data bytes (a counting pattern), int64 indices drawn
/// uniformly from each addressed axis, and their strides.
struct Inputs {
    data: Vec<u8>,
    data_strides: Vec<isize>,
    indices: Vec<u8>,
    indices_strides: Vec<isize>,
}

impl Case {
    fn parse(line: &str) -> Case {
        let f: Vec<&str> = line.split_whitespace().take(8).collect();
        let bad = || -> ! { panic!("benches/cases.txt: cannot read {line:?}") };
        let int = |s: &str| s.parse().unwrap_or_else(|_| bad());
        let shape = |s: &str| s.split(',').map(int).collect::<Vec<usize>>();
        let batch_dims = int(f[5]) as i64;
        let op = match f[1] {
            "gather_nd" => Op::GatherNd { batch_dims },
            "gather" => Op::Gather {
                axis: int(f[4]) as i64,
                batch_dims,
            },
            _ => bad(),
        };
        let mut indices_shape = shape(f[3]);
        if f[7] != "=" {
            indices_shape[0] = int(f[7]);
        }
        let itemsize = match f[6] {
            "uint8" => 1,
            "float32" => 4,
            "float64" => 8,
            _ => bad(),
        };
        Case {
            name: f[0].to_string(),
            op,
            data_shape: shape(f[2]),
            indices_shape,
            itemsize,
        }
    }

    /// The size of the data axis each index (or tuple column) addresses.
    fn bounds(&self) -> Vec<usize> {
        match self.op {
            Op::GatherNd { batch_dims } => {
                let (b, k) = (batch_dims as usize, *self.indices_shape.last().unwrap());
                self.data_shape[b..b + k].to_vec()
            }
            Op::Gather { axis, .. } => vec![self.data_shape[axis as usize]],
        }
    }

    fn build(&self) -> Inputs {
        let n_data: usize = self.data_shape.iter().product::<usize>() * self.itemsize;
        let mut data = numpy_like(n_data);
        data.extend((0..n_data).map(|i| (i % 251) as u8));
        let bounds = self.bounds();
        let n_idx: usize = self.indices_shape.iter().product();
        let mut rng = SplitMix64(0x5EED);
        let indices: Vec<u8> = (0..n_idx)
            .flat_map(|i| below(&mut rng, bounds[i % bounds.len()]).to_ne_bytes())
            .collect();
        Inputs {
            data,
            data_strides: c_strides(&self.data_shape, self.itemsize),
            indices,
            indices_strides: c_strides(&self.indices_shape, 8),
        }
    }

    fn plan<'a>(&'a self, inputs: &'a Inputs) -> Plan<'a> {
        let data = ArrayView {
            bytes: &inputs.data,
            offset: 0,
            shape: &self.data_shape,
            strides: &inputs.data_strides,
            itemsize: self.itemsize,
        };
        let indices = ArrayView {
            bytes: &inputs.indices,
            offset: 0,
            shape: &self.indices_shape,
            strides: &inputs.indices_strides,
            itemsize: 8,
        };
        let planned = match self.op {
            Op::GatherNd { batch_dims } => {
                plan_gather_nd(data, indices, IndexType::I64, batch_dims)
            }
            Op::Gather { axis, batch_dims } => {
                plan_gather(data, indices, IndexType::I64, axis, batch_dims)
            }
        };
        planned.unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }
}

fn bench_cases(c: &mut Criterion) {
    let all = ndgather::num_threads();
    let mut thread_counts = vec![1];
    if all > 1 {
        thread_counts.push(all);
    }
    for case in &cases() {
        let inputs = case.build();
        let out_bytes = case.plan(&inputs).out_bytes();
        let mut out = numpy_like(out_bytes);
        out.resize(out_bytes, 0); // warm: written once here
        let mut group = c.benchmark_group(&case.name);
        group.throughput(Throughput::Bytes(out_bytes as u64));
        if out_bytes >= 1 << 20 {
            group
                .sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
        } else {
            group
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(1));
        }
        for (label, validation) in [
            ("while_copying", Validation::WhileCopying),
            ("before_writing", Validation::BeforeWriting),
        ] {
            for &threads in &thread_counts {
                let id = BenchmarkId::new(label, format!("{threads}t"));
                group.bench_function(id, |b| {
                    b.iter(|| {
                        let plan = case.plan(black_box(&inputs));
                        plan.execute(Mode::Raise, black_box(&mut out), validation, threads)
                            .unwrap();
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench_cases);
criterion_main!(benches);
