//! The memory system of the running machine, as it reports it (cache sizes
//! from sysfs, the maker from cpuid), and the thresholds of the copy paths
//! derived from it: the model of docs/architecture.md ("Constants from the
//! machine"). Read once (at import, in the bindings, so that no fork finds
//! it half read); a machine that reports nothing gets the caches of the kind
//! the constants were first tuned on (AMD EPYC Zen 4 VM: 1 MiB L2, 32 MiB
//! L3). The cache sizes may be set instead, once, at import
//! (`NDGATHER_L2_BYTES`, `NDGATHER_LLC_BYTES`: [`set_caches`]).

use std::sync::OnceLock;

/// The cache sizes the model reads, in bytes: one core's L2, and one
/// instance of the last level (shared by the cores it serves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caches {
    pub(crate) l2: usize,
    pub(crate) last: usize,
}

/// The caches of the machine kind the constants were first tuned on.
pub(crate) const TUNED_ON: Caches = Caches {
    l2: 1 << 20,
    last: 32 << 20,
};

/// The most of the last level the model counts on for each CPU the process
/// may use, in L2s: a VM is shown its host's whole last level, which the
/// host's other cores share (the Intel Xeon model 207 VM: 260 MiB for 2
/// vCPUs), so only a part of it holds the process's rows. Sixteen L2s a
/// CPU is what the AMD kind reports (32 MiB for 2 cores of 1 MiB L2s), so
/// its constants stay; on the Intel VM the model counts 64 MiB of the 260
/// (docs/architecture.md, "Constants from the machine"). Sizes set at
/// import are counted whole: they say what the process has.
const LAST_LEVEL_PER_CPU_IN_L2S: usize = 16;

/// The part of a last level of `last` bytes the model counts on, for a
/// process that may use `cpus` CPUs with L2s of `l2` bytes.
fn counted_last(l2: usize, last: usize, cpus: usize) -> usize {
    let ours = l2
        .saturating_mul(LAST_LEVEL_PER_CPU_IN_L2S)
        .saturating_mul(cpus.max(1));
    last.min(ours)
}

/// Who made the CPU (cpuid leaf 0): the one fact of the model that is not a
/// size. Intel's cores and AMD's handle a line stored at once differently
/// (see [`Tuning::whole_line_min_bytes`]), as glibc's `memcpy` also sets
/// its non-temporal threshold per maker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Maker {
    Intel,
    /// AMD, and any other: the kind the constants were first tuned on.
    Other,
}

/// The thresholds of the copy paths that depend on the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tuning {
    /// Outputs from this size on are written with non-temporal stores:
    /// sixteen times a core's L2. Stores that miss the private caches first
    /// read their line (write-allocate) and push the lines the copy reads
    /// out of the shared cache; past what the private caches absorb, that
    /// costs more than the output being in cache saves whoever reads it
    /// next. (Half the last level was tried: on the Intel VM's 260 MiB, 32
    /// and 64 MiB outputs took 1.5x and 2.5x the time with plain stores.)
    pub(crate) stream_min_out_bytes: usize,
    /// Contiguous slices from this width on are streamed in such an output
    /// (shorter ones always go through the cache): a line, which fills a
    /// line's write-combining buffer by itself. That pays on both kinds
    /// measured (Intel Xeon model 207 VM: 64-byte rows of a 61 MiB output
    /// 0.92x the time, `out=` into NumPy's buffer 0.68x; AMD kind, with
    /// 16-byte stores: `gather_batch`'s 64-byte rows 0.64x, `rows_1m_u8`
    /// 0.72x). An earlier build on the AMD kind had measured 1.25-1.4x up
    /// to 128 bytes, and streamed only slices of four lines there
    /// (docs/performance.md).
    pub(crate) stream_min_slice_bytes: usize,
    /// The loops compiled for AVX-512 (F and DQ) run where the CPU has them
    /// (see [`wide_vectors`]): indices (a Gather's, a GatherND's tuples) are resolved eight at a
    /// time (`offsets::wide_offsets`), and streamed slices of whole lines
    /// from this width to 512 bytes, into a line-aligned output, go out one
    /// line a store rather than four 16-byte ones, a line's write-combining
    /// buffer filled by one store (`copy::stream_whole_lines`). From a line
    /// on Intel cores (Intel Xeon model 207 VM: `gather_batch`'s 64-byte
    /// rows 1.84-2.03 -> 1.66-1.71 ms); from two on AMD's, whose 64-byte
    /// rows took 1.3x the time of 16-byte stores (AMD kind: `rows_1m_u8`),
    /// while 256- and 512-byte rows took 0.6-0.7x (`rows_1m_256b`,
    /// `rows_1m_f64`).
    pub(crate) whole_line_min_bytes: usize,
    /// Whether a new result starts as far past a cache line as `data` does
    /// (16 bytes past one for NumPy's large buffers), so that a row copied
    /// from one to the other is loaded and stored on the same steps
    /// (`arrays::line_phase` in the bindings): AMD kind, 256- and 512-byte
    /// rows streamed from NumPy's `data`, `rows_1m_256b` 18.1 -> 13.4 ms
    /// and `rows_1m_f64` 34.3 -> 26.4 ms against a line-aligned result,
    /// whose 64-byte loads each straddle two lines. Not on Intel cores,
    /// whose results stay on a line: there a 64-byte row streams as one
    /// store only into a line-aligned output, and `rows_1m_u8` into NumPy's
    /// buffer 16 bytes past a line took 1.4-1.7x the time of a line-aligned
    /// one (Intel Xeon model 207 VM), and new results placed as `data` took
    /// 1.1-1.55x the time there (docs/performance.md).
    pub(crate) results_lie_as_data: bool,
    /// Whether a row streamed into whole lines of an output at another
    /// offset in its line than the row (an `out=` on a line, `data` 16
    /// bytes past one, or the other way round) is loaded a line at a time
    /// and shifted into place (`copy::shifted_lines`) rather than by 64-byte
    /// loads that each straddle two lines: AMD kind, `rows_1m_256b` on two
    /// threads from NumPy's `data` into a line-aligned `out=` 0.77-0.94x the
    /// time, from a line-aligned `data` into NumPy's buffer 0.83-0.90x, even
    /// where both lie alike (docs/performance.md). Not on Intel cores, where
    /// a new result stays on a line and so takes this path from every NumPy
    /// `data`: mixed there, `rows_1m_u8` 1.36x the time (Intel Xeon model
    /// 207 VM).
    pub(crate) loads_by_line: bool,
    /// Whether rows streamed into whole lines of an output that is not on
    /// a line (NumPy's `out=` buffers, 16 bytes past one) go out as whole
    /// lines only, each row's last bytes joined in a register with the
    /// next row's first (`copy::stream_carried_lines`), rather than the
    /// line two rows share being filled by 16-byte stores from each: on
    /// Intel cores, which wrote such lines out as partial ones (Intel Xeon
    /// model 207 VM: see docs/performance.md). Not on AMD's, where the
    /// 16-byte stores were measured to pay and this was not measured.
    pub(crate) carries_lines: bool,
    /// Whether slices of a multiple of 16 bytes up to
    /// `hints::PREFETCH_MAX`, from a `data` beyond the caches and off a
    /// line (NumPy's large buffers start 16 bytes past one), are copied by
    /// 16-byte moves, none of which straddles two lines
    /// (`copy::move_far_run`), rather than by `memcpy`, whose wider moves
    /// there each straddle two: AMD kind, 4,096 random 512-byte rows of a
    /// 512 MiB table, one thread, 206-215 -> 188-203 us. Only on AMD cores
    /// with AVX-512 (Zen 4, the one kind measured to gain). Not on Intel
    /// cores, where four times the moves cost more than the straddling:
    /// there `memcpy` took 0.75-0.83x the time of 16-byte moves for 512
    /// such rows and 0.87-0.90x for 4,096 (Intel Xeon model 207 VM); nor
    /// on AMD cores without AVX-512, where `memcpy` moves at most 32 bytes
    /// at once: there 512 and 4,096 such rows took 0.77-0.92x the time by
    /// `memcpy` (AMD EPYC Zen 3 VM; docs/performance.md).
    pub(crate) far_rows_by_sixteen: bool,
    /// Outputs from this size on (not streamed) have rows of four lines
    /// and more copied with their stores on lines (`copy::copy_to_lines`):
    /// into an output that does not start on one (NumPy's `out=` buffers
    /// start 16 bytes past a line) `memcpy` stores where the row falls,
    /// two lines a 64-byte store, which costs once the output is no longer
    /// held by a core's L2. On Intel cores a core's L2: 4,096 random
    /// 512-byte rows (2 MiB) a call into such an `out=`, one thread, took
    /// 0.87-0.90x the time, two threads 0.79-0.91x; 512 of them (256 KiB)
    /// took 1.04-1.10x, the moves at the rows' ends costing more than they
    /// saved (Intel Xeon model 207 VM, the service harness). Not measured
    /// on AMD's: never there (`usize::MAX`).
    pub(crate) lines_stored_min_out_bytes: usize,
    /// A row-path call (`rows`) reading at least this many lines of rows
    /// splits its copy over the helpers awake, each thread requesting and
    /// copying its own rows, rather than leaving them all to the caller:
    /// the row path requests every line of its rows before copying any,
    /// and one core keeps only a few dozen misses in flight, so two cores'
    /// requests halve the wait once the rows are many lines (Intel Xeon
    /// model 207 VM, two threads, 512 MiB tables: 64 ids of 512-byte rows,
    /// 512 lines, 5.2 -> 3.9-4.4 us; 256 of 128 bytes 7.5 -> 5.8-6.1 us; 512
    /// of 32 bytes 8.9-9.2 -> 7.0-7.6 us; at 256 lines 32 ids of 512 bytes
    /// took 1.15x the time, 256 of 32 bytes the same; docs/performance.md).
    /// Calls the general path would split stay in the row path too, which
    /// splits them for less (512 ids of 128 bytes 11.1-11.9 -> 9.7-9.8 us).
    /// On Intel cores, and on AMD's without AVX-512 (AMD EPYC Zen 3 VM,
    /// two threads: 64 ids of 512-byte rows 0.72-0.83x the time, 256 ids
    /// 0.71-0.85x, 512 ids of 128 bytes 0.71-0.89x); not on AMD's with it
    /// (Zen 4), where it was not measured (the row path never splits there,
    /// and leaves calls worth splitting to the general path, as before).
    pub(crate) row_split_min_lines: usize,
    /// Whether the row path copies 512-byte rows by inline 32-byte moves
    /// (`copy::copy_medium_rows`, as it copies 128- and 256-byte rows)
    /// rather than by `memcpy`. On AMD cores without AVX-512, where
    /// `memcpy`'s moves are 32 bytes too and its call and dispatch are what
    /// the inline moves save: 64 and 256 random 512-byte rows of a 512 MiB
    /// table took 0.90-0.96x the time on one thread, 0.96-0.97x on two
    /// (AMD EPYC Zen 3 VM, both builds in one process; docs/performance.md). Not where `memcpy`
    /// moves 64 bytes at once (AVX-512: Zen 4, where it copied such rows
    /// faster, and the Intel kind): as before there.
    pub(crate) half_kib_rows_by_moves: bool,
    /// Whether a far call (`hints::Ahead::far`) copies its rows of 65 to
    /// 512 bytes (`copy::MEDIUM_ROW`) by the row path's inline 32-byte
    /// pieces (`copy::copy_far_pieces`, one move each with AVX) rather than
    /// by `memcpy`, where the CPU has no AVX-512 (`memcpy` moves 32 bytes
    /// at once there too). A random row's copy waits on memory, and the
    /// fewer instructions a row takes, the more rows' misses the core keeps
    /// in flight: a 512-byte row is about 35 instructions in pieces against
    /// some 65 through `memcpy`'s call and dispatch. AMD EPYC Zen 3 VM, one
    /// thread, random rows of a 512 MiB table into a warm `out=`, both
    /// builds in one process: 4,096 rows of 512 bytes 0.78-0.88x the time
    /// (now within 1.01x of the gather floor), 4,096 of 256 bytes
    /// 0.73-0.81x, 512 of 512 bytes 0.86-0.90x (docs/performance.md). Not
    /// where `memcpy` moves 64 bytes at once (AVX-512: the Zen 4 kind copies
    /// such rows by 16-byte moves, `far_rows_by_sixteen`; the Intel kind by
    /// `memcpy`): as before there, not measured.
    pub(crate) far_rows_by_pieces: bool,
    /// Whether the row path (`rows`) requests the lines of its rows of 65
    /// to 512 bytes (`copy::MEDIUM_ROW`) a far distance ahead of the row it
    /// copies (`hints::far_rows`, the far calls' distance), rather than
    /// every row's before copying any. On AMD cores without AVX-512 the
    /// requests made all at once were worth nothing: 64 random 512-byte
    /// rows of a 512 MiB table took the gather floor as long requested all
    /// first as not requested at all (12.3-12.9 against 13.0-14.5 us, one
    /// thread), and 8.0-9.2 us requested 4 to 8 rows ahead, 9.4-11.3 at 16
    /// to 32 (`perf` of the row path: 87% of its request loop's samples on
    /// the instruction after each row's first request, which seems to wait
    /// for the row's translation, with no copy there to overlap the wait).
    /// Requested ahead, the row path took 0.74-0.81x the time at 64 and 256
    /// ids of 512 bytes, 0.73-0.95x of 256 bytes, 0.89-0.90x at 512 ids of
    /// 128 bytes (AMD EPYC Zen 3 VM, one thread, both builds in one
    /// process; docs/performance.md). Not on AMD's with AVX-512 (Zen 4:
    /// every row first took 0.45-0.49x `take`'s time there, the general
    /// kernel's requests a few rows ahead 0.57-0.81x; tuning log `rows`) or
    /// on Intel's, where it was not measured: as before there.
    pub(crate) rows_requested_ahead: bool,
    /// Lines a long copy keeps requested ahead of the row it copies, into
    /// L2 (`hints::Ahead`, far; at most `hints::PREFETCH_MAX_ROWS` rows):
    /// random rows of a large array are latency-bound, and more lines in
    /// flight hide more of a miss, up to what the core tracks. 256 where
    /// the CPU has AVX-512: on the Zen 4 kind 64 and 128 lines took
    /// 1.15-1.27x the time of 256 (4,096 random 512-byte rows, one
    /// thread), and the Intel kind's rows gained from 128 to 256. 64 on AMD
    /// cores without it: there the call floor was fastest 4 to 8 rows of
    /// 512 bytes ahead (36-72 lines), 1.2x that 32 rows ahead for 64 ids,
    /// and 64 lines took 0.93-0.98x
    /// the time of 256 for 512 and 4,096 such rows, one thread and two,
    /// 0.92-1.03x for 128-byte rows and 0.95-0.99x for 64K points (AMD
    /// EPYC Zen 3 VM, both builds in one process; docs/performance.md).
    pub(crate) far_prefetch_lines: usize,
    /// A `data` of this size is beyond the last-level cache (twice the part
    /// of it the model counts on, [`counted_last`]), so even a
    /// service-sized batch of its rows is mostly misses and is worth
    /// prefetching far ahead (`hints::Ahead`). Counting the Intel VM's whole
    /// 260 MiB, its 512 MiB service tables were not, and 4,096 ids of
    /// 128-byte rows took 1.2-1.35x the time near (docs/performance.md).
    pub(crate) far_min_data_bytes: usize,
    /// Above this, `data` is unlikely to sit in a core's L2 cache (four
    /// times it: the rows of a random batch are spread over all of `data`),
    /// so the copy prefetches rows at all.
    pub(crate) prefetch_min_data_bytes: usize,
}

impl Tuning {
    /// The model: every threshold a multiple of the cache it is about,
    /// bounded so that a machine reporting odd sizes still gets workable
    /// ones (L2 taken in 256 KiB to 64 MiB, the last level in 2 MiB to
    /// 4 GiB and at least the L2).
    /// `wide` says whether the CPU has AVX-512 ([`wide_vectors`]).
    pub(crate) fn for_machine(c: Caches, maker: Maker, wide: bool) -> Tuning {
        let l2 = c.l2.clamp(256 << 10, 64 << 20);
        let last = c.last.clamp(2 << 20, 4 << 30).max(l2);
        Tuning {
            stream_min_out_bytes: l2.saturating_mul(16),
            stream_min_slice_bytes: LINE,
            whole_line_min_bytes: match maker {
                Maker::Intel => LINE,
                Maker::Other => 2 * LINE,
            },
            results_lie_as_data: maker == Maker::Other,
            loads_by_line: maker == Maker::Other,
            carries_lines: maker == Maker::Intel,
            far_rows_by_sixteen: maker == Maker::Other && wide,
            lines_stored_min_out_bytes: match maker {
                Maker::Intel => l2,
                Maker::Other => usize::MAX,
            },
            // Not measured on AMD cores with AVX-512 (Zen 4): as before there.
            row_split_min_lines: if maker == Maker::Intel || !wide {
                512
            } else {
                usize::MAX
            },
            half_kib_rows_by_moves: !wide,
            far_rows_by_pieces: !wide,
            rows_requested_ahead: maker == Maker::Other && !wide,
            far_prefetch_lines: if maker == Maker::Other && !wide {
                64
            } else {
                256
            },
            far_min_data_bytes: last.saturating_mul(2),
            prefetch_min_data_bytes: l2.saturating_mul(4),
        }
    }
}

/// Where the model's cache sizes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The first CPU's, as sysfs reports them.
    Sysfs,
    /// Set at import (`NDGATHER_L2_BYTES`, `NDGATHER_LLC_BYTES`; [`set_caches`]).
    Environment,
    /// [`TUNED_ON`]'s: the machine reported none.
    Default,
}

/// The model of one machine: the caches it read and the thresholds derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Model {
    pub(crate) caches: Caches,
    pub(crate) from: Source,
    pub(crate) tuning: Tuning,
}

/// The model from what the machine reports (read once).
fn detected() -> &'static Model {
    static DETECTED: OnceLock<Model> = OnceLock::new();
    DETECTED.get_or_init(|| {
        let (caches, from) = match caches() {
            Some(c) => (c, Source::Sysfs),
            None => (TUNED_ON, Source::Default),
        };
        Model {
            caches,
            from,
            tuning: Tuning::for_machine(caches, maker(), wide_vectors()),
        }
    })
}

/// The model from the caches set at import, if any were ([`set_caches`]).
static SET: OnceLock<Model> = OnceLock::new();

/// The running machine's model: the caches set at import, else those it
/// reports.
#[inline]
pub(crate) fn model() -> &'static Model {
    SET.get().unwrap_or_else(detected)
}

/// The running machine's thresholds.
#[inline]
pub(crate) fn tuning() -> &'static Tuning {
    &model().tuning
}

/// Sets the cache sizes the model derives its thresholds from, in bytes: one
/// core's L2 and the last level's, each `None` for what the machine reports.
/// Like glibc's tunables for its `memcpy`, for machines that report them
/// wrong or not at all (a container hiding sysfs gets the defaults of
/// [`TUNED_ON`]; a VM may see a last level shared with many others). Once,
/// at import (`NDGATHER_L2_BYTES`, `NDGATHER_LLC_BYTES`), before any call,
/// even with neither set, so that nothing changes the model afterwards: a
/// second time is an error, as is a size of 0. Sizes are bounded as
/// [`Tuning::for_machine`] says.
pub fn set_caches(l2: Option<usize>, last: Option<usize>) -> crate::Result<()> {
    if l2 == Some(0) || last == Some(0) {
        return Err(crate::GatherError::InvalidArgument(
            "a cache size must be at least one byte".into(),
        ));
    }
    let base = *detected();
    let model = if l2.is_none() && last.is_none() {
        base
    } else {
        let caches = Caches {
            l2: l2.unwrap_or(base.caches.l2),
            last: last.unwrap_or(base.caches.last),
        };
        Model {
            caches,
            from: Source::Environment,
            tuning: Tuning::for_machine(caches, maker(), wide_vectors()),
        }
    };
    SET.set(model).map_err(|_| {
        crate::GatherError::InvalidArgument(
            "the cache sizes are set once, at import (NDGATHER_L2_BYTES, NDGATHER_LLC_BYTES)"
                .into(),
        )
    })
}

/// Whether the loops compiled for AVX-512 (F and DQ) run here: the CPU has
/// them, whoever made it (see [`Tuning::whole_line_min_bytes`]).
#[inline]
pub(crate) fn wide_vectors() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The CPUs this process may use (its affinity mask and cgroup quota): a
/// one-time cell, filled before any fork (`install_fork_handlers`).
pub(crate) fn cpus() -> usize {
    // available_parallelism reads cgroup files on every call: ask once.
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A cache line, on every x86-64 core: the unit of the widths above, and
/// of every hint (`hints` uses this one).
pub(crate) const LINE: usize = 64;

/// The CPU's maker, from cpuid's vendor string ("GenuineIntel").
fn maker() -> Maker {
    #[cfg(target_arch = "x86_64")]
    {
        // Leaf 0 exists on every x86-64 CPU.
        let id = std::arch::x86_64::__cpuid(0);
        // The vendor string is in ebx, edx, ecx, in that order.
        let intel = [id.ebx, id.edx, id.ecx] == [0x756e_6547, 0x4965_6e69, 0x6c65_746e];
        if intel {
            return Maker::Intel;
        }
    }
    Maker::Other
}

/// The first CPU's L2 and last-level cache sizes, from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`, the last
/// level as much of it as the model counts on ([`counted_last`]); `None`
/// where they are not all there (not Linux, a container hiding sysfs).
fn caches() -> Option<Caches> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut l2 = None;
    let mut last: Option<(u32, usize)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(&size)) else {
            continue;
        };
        if kind.trim() == "Instruction" {
            continue;
        }
        if level == 2 {
            l2 = Some(size);
        }
        if last.is_none_or(|(l, _)| level > l) {
            last = Some((level, size));
        }
    }
    let (level, last) = last?;
    let l2 = l2?;
    (level >= 2).then_some(Caches {
        l2,
        last: counted_last(l2, last, cpus()),
    })
}

/// A sysfs cache size: `"48K"`, `"2048K"`, `"32M"`, or bytes.
fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let (digits, scale) = match t.as_bytes().last()? {
        b'K' => (&t[..t.len() - 1], 1 << 10),
        b'M' => (&t[..t.len() - 1], 1 << 20),
        b'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::{
        caches, counted_last, maker, model, parse_size, set_caches, tuning, wide_vectors, Caches,
        Maker, Source, Tuning, TUNED_ON,
    };

    #[test]
    fn the_amd_kind_gets_the_constants_measured_on_it() {
        let t = Tuning::for_machine(TUNED_ON, Maker::Other, true);
        assert_eq!(t.stream_min_out_bytes, 16 << 20);
        assert_eq!(t.far_min_data_bytes, 64 << 20);
        assert_eq!(t.prefetch_min_data_bytes, 4 << 20);
        // Measured again on it (docs/architecture.md): slices of a line
        // stream, and those of two lines and more go out a line a store.
        assert_eq!(t.stream_min_slice_bytes, 64);
        assert_eq!(t.whole_line_min_bytes, 128);
        assert!(t.results_lie_as_data);
        assert!(t.loads_by_line);
        // Its rows into an output off a line fill the line two rows share
        // by 16-byte stores, as measured there.
        assert!(!t.carries_lines);
        // Its far rows off a line go by 16-byte moves, as measured there.
        assert!(t.far_rows_by_sixteen);
        // Its rows are stored where they fall, as before (not measured).
        assert_eq!(t.lines_stored_min_out_bytes, usize::MAX);
        // Its row path never splits, as before (not measured).
        assert_eq!(t.row_split_min_lines, usize::MAX);
        // Its row path copies 512-byte rows by `memcpy`, as measured there.
        assert!(!t.half_kib_rows_by_moves);
        // Its far rows go by 16-byte moves or `memcpy`, as before.
        assert!(!t.far_rows_by_pieces);
        // Its row path requests every row before copying any, as measured
        // there.
        assert!(!t.rows_requested_ahead);
        // Its long copies keep 256 lines requested ahead, as measured there.
        assert_eq!(t.far_prefetch_lines, 256);
    }

    #[test]
    fn intel_cores_store_whole_lines_from_one() {
        let t = Tuning::for_machine(TUNED_ON, Maker::Intel, true);
        assert_eq!(t.whole_line_min_bytes, 64);
        // Their results stay on a line: placed as `data` they took 1.1-1.55x
        // the time there (docs/performance.md).
        assert!(!t.results_lie_as_data);
        assert!(!t.loads_by_line);
        // Their rows into an output off a line go out in whole lines only.
        assert!(t.carries_lines);
        // Their far rows off a line go by `memcpy`'s wider moves.
        assert!(!t.far_rows_by_sixteen);
        // Their rows go out with their stores on lines from an output the
        // size of a core's L2.
        assert_eq!(t.lines_stored_min_out_bytes, TUNED_ON.l2);
        // Their row path splits its copy from 512 lines of rows.
        assert_eq!(t.row_split_min_lines, 512);
        // Their row path copies 512-byte rows by `memcpy`'s 64-byte moves.
        assert!(!t.half_kib_rows_by_moves);
        // And their far rows (not measured by pieces there).
        assert!(!t.far_rows_by_pieces);
        // Their row path requests every row before copying any, as before.
        assert!(!t.rows_requested_ahead);
        // Their long copies keep 256 lines requested ahead.
        assert_eq!(t.far_prefetch_lines, 256);
        // Nothing else depends on the maker.
        let other = Tuning::for_machine(TUNED_ON, Maker::Other, true);
        let by_maker = |t: Tuning| Tuning {
            whole_line_min_bytes: 0,
            results_lie_as_data: false,
            loads_by_line: false,
            carries_lines: false,
            far_rows_by_sixteen: false,
            lines_stored_min_out_bytes: 0,
            row_split_min_lines: 0,
            ..t
        };
        assert_eq!(by_maker(t), by_maker(other));
    }

    #[test]
    fn the_zen_3_kind_copies_far_rows_by_memcpy() {
        // The AMD EPYC Zen 3 VM: 512 KiB L2 a core, 32 MiB L3, no AVX-512.
        let zen3 = Caches {
            l2: 512 << 10,
            last: 32 << 20,
        };
        let t = Tuning::for_machine(zen3, Maker::Other, false);
        // Its far rows off a line go by `memcpy`: 16-byte moves took
        // 1.09-1.3x its time there (docs/performance.md).
        assert!(!t.far_rows_by_sixteen);
        // Its row path splits its copy from 512 lines of rows, as Intel's:
        // 64 ids of 512-byte rows on two threads took 0.72-0.83x the time.
        assert_eq!(t.row_split_min_lines, 512);
        // Its row path copies 512-byte rows by 32-byte moves, not `memcpy`:
        // 0.90-0.96x the time there.
        assert!(t.half_kib_rows_by_moves);
        // Its far rows of 65 to 512 bytes go by 32-byte pieces, not
        // `memcpy`: 0.73-0.90x the time there.
        assert!(t.far_rows_by_pieces);
        // Its row path requests its rows of 65 to 512 bytes the far
        // distance ahead as it copies them: 0.73-0.86x the time there.
        assert!(t.rows_requested_ahead);
        // Its long copies keep 64 lines requested ahead, not 256: 0.93-0.98x
        // the time for 512-byte rows there.
        assert_eq!(t.far_prefetch_lines, 64);
        // The rest is the AMD kind's model, scaled by its caches.
        assert_eq!(t.stream_min_out_bytes, 8 << 20);
        assert_eq!(t.prefetch_min_data_bytes, 2 << 20);
        assert_eq!(
            Tuning {
                far_rows_by_sixteen: true,
                row_split_min_lines: usize::MAX,
                half_kib_rows_by_moves: false,
                far_rows_by_pieces: false,
                rows_requested_ahead: false,
                far_prefetch_lines: 256,
                ..t
            },
            Tuning::for_machine(zen3, Maker::Other, true)
        );
    }

    #[test]
    fn small_and_huge_machines_get_sane_thresholds() {
        let kinds = [
            (256 << 10, 2 << 20),  // a small core: 256 KiB L2, 2 MiB L3
            (2 << 20, 260 << 20),  // Intel Xeon VM (model 207)
            (4 << 20, 1536 << 20), // a large server: 4 MiB L2, 1.5 GiB L3
            (0, 0),                // a machine reporting nothing usable
            (usize::MAX, usize::MAX),
        ];
        // Each kind with each maker, with AVX-512 and without.
        let cpus = [Maker::Intel, Maker::Other].map(|m| [(m, true), (m, false)]);
        for ((l2, last), (maker, wide)) in kinds.into_iter().zip(cpus.as_flattened().repeat(2)) {
            let t = Tuning::for_machine(Caches { l2, last }, maker, wide);
            assert!(
                (1 << 20..=2 << 30).contains(&t.stream_min_out_bytes),
                "{t:?}"
            );
            assert!(
                (1 << 20..=256 << 20).contains(&t.prefetch_min_data_bytes),
                "{t:?}"
            );
            assert!(t.prefetch_min_data_bytes <= t.far_min_data_bytes, "{t:?}");
            assert!((64..=256).contains(&t.stream_min_slice_bytes), "{t:?}");
            assert!((64..=512).contains(&t.whole_line_min_bytes), "{t:?}");
            assert!(t.lines_stored_min_out_bytes >= 256 << 10, "{t:?}");
            assert!(t.row_split_min_lines >= 256, "{t:?}");
            assert!((32..=1024).contains(&t.far_prefetch_lines), "{t:?}");
        }
        let intel = Tuning::for_machine(
            Caches {
                l2: 2 << 20,
                last: 260 << 20,
            },
            Maker::Intel,
            true,
        );
        assert_eq!(intel.stream_min_out_bytes, 32 << 20);
        assert_eq!(intel.far_min_data_bytes, 520 << 20);
        assert_eq!(intel.prefetch_min_data_bytes, 8 << 20);
    }

    #[test]
    fn the_last_level_counts_only_the_part_the_process_may_use() {
        const MIB: usize = 1 << 20;
        // The Intel VM: 260 MiB shown, 2 vCPUs of 2 MiB L2s count 64 MiB,
        // so its 512 MiB service tables are far (twice that).
        assert_eq!(counted_last(2 * MIB, 260 * MIB, 2), 64 * MIB);
        let intel = Tuning::for_machine(
            Caches {
                l2: 2 * MIB,
                last: 64 * MIB,
            },
            Maker::Intel,
            true,
        );
        assert_eq!(intel.far_min_data_bytes, 128 * MIB);
        // One CPU of it (an affinity mask) counts half that.
        assert_eq!(counted_last(2 * MIB, 260 * MIB, 1), 32 * MIB);
        // A process on all of a large server's cores counts the whole level.
        assert_eq!(counted_last(2 * MIB, 260 * MIB, 64), 260 * MIB);
        assert_eq!(counted_last(4 * MIB, 1536 * MIB, 128), 1536 * MIB);
        // The AMD kind's cores count all it reports: its constants stay.
        assert_eq!(counted_last(MIB, 32 * MIB, 2), TUNED_ON.last);
        // Nothing overflows, and no CPUs counts as one.
        assert_eq!(counted_last(usize::MAX, usize::MAX, usize::MAX), usize::MAX);
        assert_eq!(counted_last(MIB, 260 * MIB, 0), 16 * MIB);
    }

    #[test]
    fn sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("266240K"), Some(260 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("big"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn this_machine_reports_caches_or_gets_the_defaults() {
        let t = *tuning();
        match caches() {
            Some(c) => {
                assert!(c.l2 > 0 && c.last >= c.l2, "{c:?}");
                assert_eq!(t, Tuning::for_machine(c, maker(), wide_vectors()));
                assert_eq!(model().from, Source::Sysfs);
            }
            None => {
                assert_eq!(t, Tuning::for_machine(TUNED_ON, maker(), wide_vectors()));
                assert_eq!(model().from, Source::Default);
            }
        }
        // Nothing set in the tests: a size of 0 is refused before that is
        // looked at, and the model stays what the machine reports.
        assert!(set_caches(Some(0), None).is_err());
        assert!(set_caches(None, Some(0)).is_err());
        assert_eq!(*tuning(), t);
    }
}
