//! The pages a gather will read from a file mapping, brought into memory
//! with many reads in flight before the copy, so that the copy's faults
//! are minor ones instead of one synchronous read each (and none reads
//! around by the device's read-ahead).
//!
//! The mechanism, chosen by measurement (docs/performance.md, "Tables in
//! files"): `madvise(MADV_WILLNEED)` on each run of missing pages (the
//! kernel queues a read of exactly those pages, asynchronously, and the
//! block layer keeps as many in flight as the device takes), then
//! `madvise(MADV_POPULATE_READ)` on each from the same thread, which waits
//! for them, maps them, and reports a page past the file's end as an error
//! (`EFAULT`) where a read would be a `SIGBUS`. No thread, no ring.
//!
//! The core stays pure: it is given the plan and the rows' offsets; the
//! bindings decide whether `data` lies in a mapping at all.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::layout::SliceLayout;
use crate::mode::Mode;
use crate::offsets::ZERO_FILL;
use crate::plan::Plan;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether gathers from a file mapping bring their pages in first
/// (`ndgather.set_prefault`); off, the copy faults each page itself.
pub fn set_prefault(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// See [`set_prefault`].
pub fn prefault_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The output rows of a call, as byte offsets from `data`'s element
/// `[0, ..., 0]` (or [`ZERO_FILL`]).
pub(crate) trait RowOffsets: Sync {
    /// Fills `out` with the offsets of rows `start..start + out.len()`;
    /// `false` for a bad index, which the copy will report.
    fn offsets(&self, start: usize, out: &mut [isize]) -> bool;
}

/// A one-shot call's rows, `mode` applied to their indices.
pub(crate) struct OneShot<'a> {
    pub(crate) plan: &'a Plan<'a>,
    pub(crate) mode: Mode,
}

impl RowOffsets for OneShot<'_> {
    fn offsets(&self, start: usize, out: &mut [isize]) -> bool {
        self.plan.row_offsets(self.mode, start, out).is_ok()
    }
}

/// Rows whose offsets are computed at a time.
const BATCH: usize = 1024;

/// Rows tested when no recent call on the table found a page missing (and
/// none found it warm within [`RESAMPLE_NS`]): if each is resident, the
/// call is taken as warm and nothing more is asked of the kernel. A
/// `mincore` of one page costs 0.4-0.7 us (Intel Xeon VM), as much as
/// copying 50 KiB warm: one row per 512 KiB of output, at most this many,
/// keeps a sampling call's test near 5% of its copy. (A table that is
/// partly cold is found by the first call whose sample misses; its calls
/// then test every page.)
const SAMPLE: usize = 4;
const SAMPLE_BYTES: usize = 512 * 1024;

/// Tables on which a recent call found pages missing: a table half in
/// memory (larger than memory, or cooling) would pass a sample while its
/// copy faults the rest one at a time, so their calls test every page until
/// one finds them all resident.
static COLD_TABLES: Tables = Tables::new();

/// Tables a recent call found warm (its sample and the table's last page
/// resident), with when: a call within [`RESAMPLE_NS`] of that takes the
/// table as warm without a sample, and every call on one of them populates
/// the last page without asking `mincore` first. That leaves a warm call
/// one `madvise` (about 0.3 us) where the sample and the last page's test
/// cost 1 us (docs/performance.md, "Tables in files"). Entries are hints:
/// a table that cooled within the window costs one call that faults its
/// cold pages itself (and takes long enough that the next call samples
/// again); a last page evicted since is read around once.
static WARM_TABLES: Tables = Tables::new();

/// How long a table found warm is taken as warm without a sample.
const RESAMPLE_NS: u64 = 1_000_000;

/// A few tables, by the address of their first byte, each with a value (a
/// time, for [`WARM_TABLES`]). Entries are only hints (a table forgotten or
/// confused with another costs one more test or one read around a page,
/// never a wrong result): relaxed atomics suffice.
struct Tables {
    slots: [AtomicUsize; 8],
    values: [AtomicU64; 8],
    /// The slot the next new entry takes (round robin: the oldest goes).
    next: AtomicUsize,
}

impl Tables {
    const fn new() -> Self {
        Tables {
            slots: [const { AtomicUsize::new(0) }; 8],
            values: [const { AtomicU64::new(0) }; 8],
            next: AtomicUsize::new(0),
        }
    }

    fn slot(&self, table: usize) -> Option<usize> {
        self.slots
            .iter()
            .position(|t| t.load(Ordering::Relaxed) == table)
    }

    /// `table`'s value, if it is here.
    fn get(&self, table: usize) -> Option<u64> {
        Some(self.values[self.slot(table)?].load(Ordering::Relaxed))
    }

    fn put(&self, table: usize, value: u64) {
        let i = self.slot(table).unwrap_or_else(|| {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
            self.slots[i].store(table, Ordering::Relaxed);
            i
        });
        self.values[i].store(value, Ordering::Relaxed);
    }

    fn remove(&self, table: usize) {
        if let Some(i) = self.slot(table) {
            self.slots[i].store(0, Ordering::Relaxed);
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (a vDSO read, no system call).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the one timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// The pages one call reads: where `data` is, and which bytes of a row.
struct Reads<'p> {
    plan: &'p Plan<'p>,
    page: usize,
    /// The address of `data`'s element `[0, ..., 0]`.
    first: usize,
    /// The bytes a row reads, from its offset: `(lowest, length)`.
    lo: isize,
    len: usize,
    /// The page of the last byte `data` may read: past the file's end if
    /// the file was cut anywhere below the table.
    last_page: usize,
}

impl<'p> Reads<'p> {
    fn new(plan: &'p Plan<'p>) -> Option<Self> {
        let (lo, len) = match &plan.slice {
            SliceLayout::Contiguous { bytes } => (0, *bytes),
            SliceLayout::Strided { run, outer } => {
                let (mut lo, mut hi) = (0isize, *run as isize);
                for &(n, s) in outer {
                    let reach = (n as isize - 1) * s;
                    if reach < 0 {
                        lo += reach;
                    } else {
                        hi += reach;
                    }
                }
                // A slice spread far wider than it is (a column of a wide
                // table) would read pages it does not need: left to the copy.
                if (hi - lo) as usize > 4 * plan.slice_bytes.max(page_size()) {
                    return None;
                }
                (lo, (hi - lo) as usize)
            }
        };
        let bytes = plan.data.bytes;
        if len == 0 || plan.n_rows == 0 || plan.out_bytes == 0 || bytes.is_empty() {
            return None;
        }
        let page = page_size();
        Some(Reads {
            plan,
            page,
            first: plan.data.first() as usize,
            lo,
            len,
            last_page: (bytes.as_ptr() as usize + bytes.len() - 1) / page,
        })
    }

    fn table(&self) -> usize {
        self.plan.data.bytes.as_ptr() as usize
    }

    /// The first byte a row at `offset` reads.
    fn start(&self, offset: isize) -> usize {
        self.first.wrapping_add_signed(offset + self.lo)
    }

    /// Whether the call is warm: a sample of its rows resident (unless the
    /// table was found warm within [`RESAMPLE_NS`]), then the table's last
    /// page. That is populated too (mapped; no read), and a file cut
    /// anywhere below the table fails there, where `mincore` may count
    /// pages past a file's end as resident (the rest of a large folio cut
    /// by a truncation). A last page not resident is left to the full pass
    /// (populating it cold would read around it by the mapping's
    /// read-ahead: 4 ms for 8 MiB here). A bad index counts as resident:
    /// the copy reports it.
    fn warm(&self, rows: &dyn RowOffsets, vec: &mut Vec<u8>) -> io::Result<bool> {
        let table = self.table();
        let now = monotonic_ns();
        let found = WARM_TABLES.get(table);
        if found.is_none_or(|at| now.wrapping_sub(at) >= RESAMPLE_NS) {
            if !self.sample_resident(rows, vec)
                || found.is_none() && !resident(self.last_page, 1, self.page, vec)
            {
                return Ok(false);
            }
            WARM_TABLES.put(table, now);
        }
        populate(&[(self.last_page, 1)], self.page)?;
        Ok(true)
    }

    /// Whether a sample of the rows is resident: one row per
    /// [`SAMPLE_BYTES`] of output, at most [`SAMPLE`].
    fn sample_resident(&self, rows: &dyn RowOffsets, vec: &mut Vec<u8>) -> bool {
        let n = self.plan.n_rows;
        let samples = (self.plan.out_bytes / SAMPLE_BYTES).clamp(1, SAMPLE).min(n);
        let step = n / samples;
        let mut one = [0isize; 1];
        (0..samples).all(|i| {
            !rows.offsets(i * step, &mut one) || one[0] == ZERO_FILL || {
                let a = self.start(one[0]);
                let first = a / self.page;
                resident(
                    first,
                    (a + self.len - 1) / self.page + 1 - first,
                    self.page,
                    vec,
                )
            }
        })
    }

    /// The runs of pages `(first, count)` the rows read and the table's
    /// last page, sorted and merged; `None` for a bad index.
    fn runs(&self, rows: &dyn RowOffsets) -> Option<Vec<(usize, usize)>> {
        let n = self.plan.n_rows;
        let mut starts: Vec<usize> = Vec::with_capacity(n);
        let mut offs = [0isize; BATCH];
        for start in (0..n).step_by(BATCH) {
            let offs = &mut offs[..BATCH.min(n - start)];
            if !rows.offsets(start, offs) {
                return None;
            }
            starts.extend(
                offs.iter()
                    .filter(|&&o| o != ZERO_FILL)
                    .map(|&o| self.start(o)),
            );
        }
        let mut runs = page_runs(&mut starts, self.len, self.page);
        match runs.last() {
            Some(&(p, c)) if p + c > self.last_page => {}
            _ => runs.push((self.last_page, 1)),
        }
        Some(runs)
    }
}

/// Brings the pages `plan`'s copy will read into memory unless they are
/// resident (a sample of them, or every one after a call on this table
/// found pages missing). Returns `Ok` without reading for a bad index (the
/// copy reports it); an error is a read that failed (`EFAULT`: a file
/// shorter than its mapping; `EIO`), and then nothing may be copied.
/// `detach` runs the reads (with the GIL released, in the bindings).
pub(crate) fn prefault(
    plan: &Plan<'_>,
    rows: &dyn RowOffsets,
    detach: impl FnOnce(&(dyn Fn() -> io::Result<()> + Sync)) -> io::Result<()>,
) -> io::Result<()> {
    let Some(reads) = Reads::new(plan) else {
        return Ok(());
    };
    let mut vec = Vec::new();
    if COLD_TABLES.get(reads.table()).is_none() && reads.warm(rows, &mut vec)? {
        return Ok(());
    }
    detach(&|| {
        let Some(runs) = reads.runs(rows) else {
            return Ok(());
        };
        let mut vec = Vec::new();
        let last = runs.last().copied();
        let mut missing: Vec<(usize, usize)> = runs
            .into_iter()
            .filter(|&(p, n)| !resident(p, n, reads.page, &mut vec))
            .collect();
        if missing.is_empty() {
            COLD_TABLES.remove(reads.table());
        } else {
            COLD_TABLES.put(reads.table(), 0);
        }
        // The run of the table's last page is populated whatever `mincore`
        // says (see `sample_resident`).
        if last.is_some() && missing.last() != last.as_ref() {
            missing.extend(last);
        }
        read_in(&missing, reads.page)
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(1)
}

/// Whether every page of `count` from page number `first` is resident. A
/// failing `mincore` (not mapped) says no.
fn resident(first: usize, count: usize, page: usize, vec: &mut Vec<u8>) -> bool {
    // A warm call's sample spans a page or two: no allocation for it.
    let mut small = [0u8; 32];
    let buf: &mut [u8] = if count <= small.len() {
        &mut small[..count]
    } else {
        vec.clear();
        vec.resize(count, 0);
        vec
    };
    // SAFETY: mincore reads no memory of ours and writes one byte per page
    // of the range into `buf`, which holds `count` bytes.
    let rc = unsafe {
        libc::mincore(
            (first * page) as *mut libc::c_void,
            count * page,
            buf.as_mut_ptr(),
        )
    };
    rc == 0 && buf.iter().all(|b| b & 1 == 1)
}

/// The distinct pages (as page numbers of the address space) that reads of
/// `bytes` bytes at `starts` touch, sorted, merged into runs `(first page,
/// count)`.
pub(crate) fn page_runs(starts: &mut [usize], bytes: usize, page: usize) -> Vec<(usize, usize)> {
    starts.sort_unstable();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &a in starts.iter() {
        let (first, last) = (a / page, (a + bytes - 1) / page);
        match runs.last_mut() {
            Some((s, n)) if first <= *s + *n => *n = (*n).max(last + 1 - *s),
            _ => runs.push((first, last + 1 - first)),
        }
    }
    runs
}

/// Linux 5.14's `MADV_POPULATE_READ` (older `libc` crates do not name it).
const MADV_POPULATE_READ: libc::c_int = 22;

/// Set when the kernel refused `MADV_POPULATE_READ` (before 5.14): the
/// reads are then only queued, and the copy waits for them in its faults.
static NO_POPULATE: AtomicBool = AtomicBool::new(false);

/// `madvise(advice)` on a run of pages.
fn advise((first, count): (usize, usize), page: usize, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: advice on pages of `data`'s mapping, which the plan borrows:
    // WILLNEED starts reads, POPULATE_READ faults the pages in for reading
    // (reporting a read past the file's end as an error rather than a
    // signal); neither changes any contents.
    let rc = unsafe { libc::madvise((first * page) as *mut libc::c_void, count * page, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Queues a read of every run, then waits for them and maps them.
fn read_in(runs: &[(usize, usize)], page: usize) -> io::Result<()> {
    // Only advice: a refusal (memory that is not a file's) leaves the
    // reads to the populate step or the copy.
    for &r in runs {
        drop(advise(r, page, libc::MADV_WILLNEED));
    }
    populate(runs, page)
}

/// Maps every run for reading, waiting for reads in flight; `EFAULT` for
/// a page past the file's end, or the read's error.
fn populate(runs: &[(usize, usize)], page: usize) -> io::Result<()> {
    if NO_POPULATE.load(Ordering::Relaxed) {
        return Ok(());
    }
    for &r in runs {
        match advise(r, page, MADV_POPULATE_READ) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                NO_POPULATE.store(true, Ordering::Relaxed);
                return Ok(());
            }
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{page_runs, page_size, prefault, resident, OneShot, WARM_TABLES};
    use crate::mode::Mode;
    use crate::plan::plan_gather;
    use crate::test_support::view;
    use crate::IndexType;
    use std::os::fd::AsRawFd;

    #[test]
    fn runs_merge_adjacent_and_overlapping_pages() {
        let mut a = vec![8192, 0, 100, 4000, 20000];
        assert_eq!(page_runs(&mut a, 200, 4096), vec![(0, 3), (4, 1)]);
        let mut b = vec![4090];
        assert_eq!(page_runs(&mut b, 10, 4096), vec![(0, 2)]);
    }

    /// A table of 64 one-page rows mapped from a file: a gather's pages are
    /// resident after `prefault`, and a file cut below the table fails it.
    #[test]
    fn a_mapped_table_is_read_in_and_a_cut_file_is_an_error() {
        let page = page_size();
        let rows = 64;
        let path = std::env::temp_dir().join(format!("ndgather-pages-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; rows * page]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a fresh shared read-only mapping of the whole file, unmapped
        // below; nothing writes the file while it is read.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                rows * page,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the mapping holds `rows * page` readable bytes until munmap.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, rows * page) };
        let (shape, strides) = ([rows, page], [page as isize, 1]);
        let ids: Vec<u8> = [5i64, 63, 0].iter().flat_map(|i| i.to_ne_bytes()).collect();
        let data = view(bytes, &shape, &strides, 1);
        let plan = plan_gather(data, view(&ids, &[3], &[8], 8), IndexType::I64, 0, 0).unwrap();
        let rows_of = OneShot {
            plan: &plan,
            mode: Mode::Raise,
        };
        prefault(&plan, &rows_of, |read| read()).unwrap();
        let first = p as usize / page;
        let mut vec = Vec::new();
        for row in [0, 5, 63] {
            assert!(resident(first + row, 1, page, &mut vec), "row {row}");
        }
        // Warm now: the next call samples and stamps the table, the one
        // after takes it as warm unsampled; the cut must still fail it.
        prefault(&plan, &rows_of, |read| read()).unwrap();
        prefault(&plan, &rows_of, |read| read()).unwrap();
        assert!(WARM_TABLES.get(p as usize).is_some());
        let cut = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        cut.set_len((rows as u64 - 2) * page as u64).unwrap();
        let e = prefault(&plan, &rows_of, |read| read()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        // SAFETY: the mapping made above; `bytes` and `plan` are not used after.
        unsafe { libc::munmap(p, rows * page) };
        std::fs::remove_file(&path).unwrap();
    }
}
