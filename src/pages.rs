//! PROTOTYPE (issue 30): bringing the pages a gather will read from a file
//! mapping into memory with many reads in flight before the copy, so that
//! the copy's faults are minor ones instead of one synchronous read each.
//!
//! The core stays pure: it is given addresses (the plan's row offsets from
//! `data`'s first element) and asks the kernel about them (`mincore`,
//! `madvise`); the bindings decide whether `data` is a mapping at all.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::layout::SliceLayout;
use crate::mode::Mode;
use crate::offsets::ZERO_FILL;
use crate::plan::Plan;

/// How the missing pages are brought in (a setting while prototyping:
/// `NDGATHER_PREFAULT`, read by the bindings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefault {
    /// Nothing: the copy faults every page itself (the build before).
    Off,
    /// `madvise(MADV_WILLNEED)` per run of missing pages from the calling
    /// thread (or `threads`): asynchronous read-ahead of exactly those
    /// pages.
    WillNeed {
        /// Threads issuing the advice.
        threads: usize,
    },
    /// `WillNeed`, then `Populate` from the calling thread: the reads are
    /// in flight before the first populate waits, and populate maps the
    /// pages in one call a run and reports a read past the file's end.
    WillNeedThenPopulate {
        /// Threads issuing the WILLNEED advice.
        threads: usize,
    },
    /// `madvise(MADV_POPULATE_READ)` per run of missing pages from
    /// `threads` threads: each blocks on its reads, so `threads` are in
    /// flight; errors (a file shorter than its mapping) come back as errno.
    Populate {
        /// Threads issuing the reads (reads in flight).
        threads: usize,
    },
}

/// Rows whose offsets are computed at a time (a stack-sized batch).
const BATCH: usize = 4096;

/// Pages tested first; if every one is resident, the call is taken as warm
/// and nothing more is asked of the kernel (the warm goal: a `mincore` per
/// run costs about a microsecond, as much as copying a few rows).
const SAMPLE: usize = 8;

/// Bytes of output per sampled page (see [`Plan::prefault`]).
const SAMPLE_BYTES: usize = 128 * 1024;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(1)
}

/// Whether every page of `[addr, addr + pages * page)` is resident
/// (`addr` page-aligned). A failing `mincore` (not a mapping) says no.
fn resident(addr: usize, pages: usize, page: usize, vec: &mut Vec<u8>) -> bool {
    vec.clear();
    vec.resize(pages, 0);
    // SAFETY: mincore reads no memory of ours but writes one byte per page
    // of the range into `vec`, which holds `pages` bytes.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
    rc == 0 && vec.iter().all(|b| b & 1 == 1)
}

/// The distinct pages (as page numbers of the address space) that rows of
/// `bytes` bytes at `addrs` touch, sorted, merged into runs `(first page,
/// count)`.
pub fn page_runs(addrs: &mut [usize], bytes: usize, page: usize) -> Vec<(usize, usize)> {
    addrs.sort_unstable();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &a in addrs.iter() {
        let (first, last) = (a / page, (a + bytes - 1) / page);
        match runs.last_mut() {
            Some((s, n)) if first <= *s + *n => *n = (*n).max(last + 1 - *s),
            _ => runs.push((first, last + 1 - first)),
        }
    }
    runs
}

impl Plan<'_> {
    /// Brings the pages this plan's copy will read into memory `how`,
    /// skipping the work when a sample of them is resident. A bad index is
    /// left for the copy to report. Only contiguous slices are handled.
    pub fn prefault(&self, mode: Mode, how: Prefault) -> std::io::Result<()> {
        let sb = match self.slice {
            SliceLayout::Contiguous { bytes } if bytes > 0 => bytes,
            _ => return Ok(()),
        };
        if how == Prefault::Off || self.n_rows == 0 {
            return Ok(());
        }
        let page = page_size();
        let base = self.data.first() as usize;
        let mut vec = Vec::new();
        let touched = |o: isize| {
            let a = base.wrapping_add_signed(o);
            (a / page, (a + sb - 1) / page)
        };
        // The sample: a few rows spread over the call, their offsets alone
        // computed, one `mincore` each (about 0.5 us): one per 128 KiB the
        // copy writes, at most `SAMPLE`, so that the test costs a warm
        // call under a tenth of its copy.
        let samples = (self.out_bytes / SAMPLE_BYTES)
            .clamp(1, SAMPLE)
            .min(self.n_rows);
        let step = self.n_rows / samples;
        let mut one = [0isize; 1];
        let warm = (0..samples).all(|i| {
            // A bad index: taken as warm, the copy reports it.
            self.row_offsets(mode, i * step, &mut one).is_err() || one[0] == ZERO_FILL || {
                let (first, last) = touched(one[0]);
                resident(first * page, last + 1 - first, page, &mut vec)
            }
        });
        if warm {
            return Ok(());
        }
        let mut addrs: Vec<usize> = Vec::with_capacity(self.n_rows);
        let mut offs = [0isize; BATCH];
        let mut start = 0;
        while start < self.n_rows {
            let n = BATCH.min(self.n_rows - start);
            if self.row_offsets(mode, start, &mut offs[..n]).is_err() {
                return Ok(());
            }
            addrs.extend(
                offs[..n]
                    .iter()
                    .filter(|&&o| o != ZERO_FILL)
                    .map(|&o| base.wrapping_add_signed(o)),
            );
            start += n;
        }
        let runs: Vec<(usize, usize)> = page_runs(&mut addrs, sb, page)
            .into_iter()
            .filter(|&(p, n)| !resident(p * page, n, page, &mut vec))
            .collect();
        match how {
            Prefault::Off => Ok(()),
            Prefault::WillNeed { threads } => advise(&runs, page, threads, libc::MADV_WILLNEED),
            Prefault::WillNeedThenPopulate { threads } => {
                advise(&runs, page, threads, libc::MADV_WILLNEED)?;
                advise(&runs, page, 1, MADV_POPULATE_READ)
            }
            Prefault::Populate { threads } => advise(&runs, page, threads, MADV_POPULATE_READ),
        }
    }
}

/// Linux 5.14's `MADV_POPULATE_READ` (libc 0.2 may not name it).
const MADV_POPULATE_READ: libc::c_int = 22;

/// `madvise(advice)` on each run from up to `threads` threads; the first
/// error wins (POPULATE_READ: EFAULT for a page past the file's end).
fn advise(
    runs: &[(usize, usize)],
    page: usize,
    threads: usize,
    advice: libc::c_int,
) -> std::io::Result<()> {
    let next = AtomicUsize::new(0);
    let err = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(&(p, n)) = runs.get(i) else { return };
        // SAFETY: advice on pages of `data`'s mapping, which the plan
        // borrows: WILLNEED starts reads, POPULATE_READ faults pages in for
        // reading and reports a read past the file's end as an error rather
        // than a signal; neither changes any contents.
        let rc = unsafe { libc::madvise((p * page) as *mut libc::c_void, n * page, advice) };
        if rc != 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(5);
            err.store(e as usize, Ordering::Relaxed);
            return;
        }
    };
    let threads = threads.clamp(1, runs.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(work);
            }
            work();
        });
    }
    match err.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e as i32)),
    }
}

#[cfg(test)]
mod tests {
    use super::page_runs;

    #[test]
    fn runs_merge_adjacent_and_overlapping_pages() {
        let mut a = vec![8192, 0, 100, 4000, 20000];
        assert_eq!(page_runs(&mut a, 200, 4096), vec![(0, 3), (4, 1)]);
        let mut b = vec![4090];
        assert_eq!(page_runs(&mut b, 10, 4096), vec![(0, 2)]);
    }
}
