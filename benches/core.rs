//! Criterion benchmark of the Rust core, without Python: the cases of
//! `benches/cases.py` (the peer comparison's), with fewer indices where a
//! case's output would be hundreds of MiB, so that kernel changes can be
//! measured in seconds.
//!
//! ```sh
//! cargo bench --bench core                        # every case, 1 thread and all threads
//! cargo bench --bench core -- points_2m           # one case (a criterion filter)
//! cargo bench --bench core -- 'rows_1m_256b/kept/1t' # one case, out=, one thread
//! ```
//!
//! Each benchmark is one call as the bindings make it: plan (shape checks,
//! the walk) plus `Plan::execute` into a warm output buffer of exactly the
//! result's size. `scratch` is the path of a call returning a new array
//! (indices validated while copying), `kept` the path of `out=` (every index
//! validated before the output is written). Benchmark ids are
//! `case/path/threads`, with threads 1 and `ndgather::num_threads()` (every
//! CPU). Throughput is the output's bytes per second.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndgather::{plan_gather, plan_gather_nd, ArrayView, IndexType, Mode, Plan, Validation};

#[derive(Clone, Copy)]
enum Op {
    GatherNd { batch_dims: i64 },
    Gather { axis: i64, batch_dims: i64 },
}

struct Case {
    name: &'static str,
    op: Op,
    data_shape: &'static [usize],
    indices_shape: &'static [usize],
    itemsize: usize,
}

const fn nd(
    name: &'static str,
    data_shape: &'static [usize],
    indices_shape: &'static [usize],
    batch_dims: i64,
    itemsize: usize,
) -> Case {
    Case {
        name,
        op: Op::GatherNd { batch_dims },
        data_shape,
        indices_shape,
        itemsize,
    }
}

const fn g(
    name: &'static str,
    data_shape: &'static [usize],
    indices_shape: &'static [usize],
    axis: i64,
    batch_dims: i64,
) -> Case {
    Case {
        name,
        op: Op::Gather { axis, batch_dims },
        data_shape,
        indices_shape,
        itemsize: 4,
    }
}

/// The cases of `benches/cases.py`, data float32 unless an itemsize says
/// otherwise. Index counts reduced (data shapes kept) are marked.
const CASES: &[Case] = &[
    nd("tiny_gather_nd", &[2, 2], &[2, 2], 0, 4),
    g("tiny_gather", &[3, 2], &[2, 2], 0, 0),
    nd("ov_gnd8_xml1", &[1000, 256, 10, 15], &[25, 125, 3], 0, 4),
    nd("ov_gnd8_xml2", &[30, 2, 100, 35], &[30, 2, 3, 1], 2, 4),
    nd("ov_gnd8_xml3", &[1, 64, 64, 320], &[1, 64, 64, 1, 1], 3, 4),
    // 2M lookups in the Python benchmark.
    nd("points_2m", &[4096, 4096], &[500_000, 2], 0, 4),
    // 1M lookups in the Python benchmark (also for the uint8 and float64 rows).
    nd("rows_1m_256b", &[1_000_000, 64], &[250_000, 1], 0, 4),
    nd("rows_1m_u8", &[1_000_000, 64], &[250_000, 1], 0, 1),
    nd("rows_1m_f64", &[1_000_000, 64], &[250_000, 1], 0, 8),
    // 4096 lookups in the Python benchmark.
    nd("slices_128k", &[4096, 32768], &[1024, 1], 0, 4),
    nd("tokens_b1", &[64, 2048, 256], &[64, 512, 1], 1, 4),
    // 1M indices in the Python benchmark.
    g("gather_axis0", &[100_000, 128], &[250_000], 0, 0),
    g("gather_axis1", &[256, 4096, 64], &[1024], 1, 0),
    g("gather_batch", &[32, 8, 4096, 16], &[32, 2048], 2, 1),
];

/// splitmix64: deterministic inputs with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> i64 {
        (self.next() % n as u64) as i64
    }
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
        let data: Vec<u8> = (0..n_data).map(|i| (i % 251) as u8).collect();
        let bounds = self.bounds();
        let n_idx: usize = self.indices_shape.iter().product();
        let mut rng = Rng(0x5EED);
        let indices: Vec<u8> = (0..n_idx)
            .flat_map(|i| rng.below(bounds[i % bounds.len()]).to_ne_bytes())
            .collect();
        Inputs {
            data,
            data_strides: c_strides(self.data_shape, self.itemsize),
            indices,
            indices_strides: c_strides(self.indices_shape, 8),
        }
    }

    fn plan<'a>(&'a self, inputs: &'a Inputs) -> Plan<'a> {
        let data = ArrayView {
            bytes: &inputs.data,
            offset: 0,
            shape: self.data_shape,
            strides: &inputs.data_strides,
            itemsize: self.itemsize,
        };
        let indices = ArrayView {
            bytes: &inputs.indices,
            offset: 0,
            shape: self.indices_shape,
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
    for case in CASES {
        let inputs = case.build();
        let out_bytes = case.plan(&inputs).out_bytes();
        let mut out = vec![0u8; out_bytes]; // warm: written once here
        let mut group = c.benchmark_group(case.name);
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
            ("scratch", Validation::WhileCopying),
            ("kept", Validation::BeforeWriting),
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
