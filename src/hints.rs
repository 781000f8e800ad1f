//! Every cache hint and store fence of the crate, and the sizes that decide
//! how far a hint reaches: the one place a retune of the memory-system
//! constants (issue 31) has to find; the sizes that depend on the caches
//! are derived from the running machine's (`machine`). The loops that issue the hints stay
//! with their paths; the hints themselves are issued only here.

use crate::machine::tuning;
/// The cache line of every x86-64 core (`machine`'s): hints are one a line.
pub(crate) use crate::machine::LINE;

/// At most this many bytes of a slice are prefetched: longer slices are
/// streamed well by the hardware prefetcher once started.
pub(crate) const PREFETCH_MAX: usize = 1024;

/// Rows a long call requests ahead at most: past that, the requests for
/// slices of one line (elements, 64-byte rows) outrun what the core tracks
/// (2M points took 1.05-1.1x the time 256 rows ahead than 128 on the Intel
/// VM; docs/performance.md).
pub(crate) const PREFETCH_MAX_ROWS: usize = 128;

/// Lines in flight for short calls, requested into L1: a short call gains
/// nothing from the long distance and pays for the extra hints.
pub(crate) const NEAR_PREFETCH_LINES: usize = 32;

/// Rows from which a call is long (prefetches
/// `machine::Tuning::far_prefetch_lines` into L2).
pub(crate) const FAR_MIN_ROWS: usize = 16 * 1024;

/// Rows from which a call of slices of a line or more from a `data` beyond
/// the last-level cache (`machine::Tuning::far_min_data_bytes`) is long:
/// even a service-sized batch of its rows is mostly misses, and the near
/// distance (ten rows of 128 bytes) hides too little of a miss. Narrower
/// slices stay near: [`NEAR_PREFETCH_LINES`] is then 32 rows ahead, which
/// covered a miss as well as the far distance in cold batches (AMD kind,
/// 4,096 ids from 512 MiB tables: 4- and 16-byte rows 0.96-0.98x the far
/// time, 60-byte rows 0.74-0.89x) and costs less when the rows are cached
/// (`ov_gnd8_xml1`, the same 3,125 60-byte slices every call: 0.82x;
/// docs/performance.md).
pub(crate) const FAR_MIN_ROWS_HUGE: usize = 256;

/// How a copy loop prefetches, a const parameter of the loops (a test per
/// row cost short calls): not at all, [`NEAR_PREFETCH_LINES`] to L1, or
/// `machine::Tuning::far_prefetch_lines` to L2.
pub(crate) const NONE: u8 = 0;
/// See [`NONE`].
pub(crate) const NEAR: u8 = 1;
/// See [`NONE`].
pub(crate) const FAR: u8 = 2;

/// How far ahead a copy prefetches, and where to.
#[derive(Clone, Copy)]
pub(crate) struct Ahead {
    /// Rows ahead.
    pub(crate) rows: usize,
    /// A long call from a `data` beyond the caches:
    /// `machine::Tuning::far_prefetch_lines`
    /// lines ahead, to L2; else [`NEAR_PREFETCH_LINES`], to L1.
    pub(crate) far: bool,
    /// Whether a slice's last byte may lie on a line that its lines taken
    /// [`LINE`] bytes apart from its first byte miss, so that [`slice`]
    /// requests that line too (see [`tail_line`]).
    pub(crate) tail: bool,
    /// Whether a far call's slices of a multiple of 16 bytes, off a line,
    /// are copied by 16-byte moves rather than `memcpy`
    /// (`machine::Tuning::far_rows_by_sixteen`, `copy::move_far_run`).
    pub(crate) by_sixteen: bool,
    /// Whether a far call's slices of 65 to 512 bytes are copied by inline
    /// 32-byte pieces rather than `memcpy`
    /// (`machine::Tuning::far_rows_by_pieces`, `copy::copy_far_pieces`).
    pub(crate) by_pieces: bool,
    /// Whether slices of four lines and more are copied with their stores
    /// on lines (`copy::copy_to_lines`): the call's output is large enough
    /// (`machine::Tuning::lines_stored_min_out_bytes`).
    pub(crate) to_lines: bool,
}

impl Ahead {
    /// For a call of `rows` slices of `width` bytes read from a `data` of
    /// `data_bytes`, which prefetches at all if `prefetch`.
    #[inline]
    pub(crate) fn new(prefetch: bool, rows: usize, data_bytes: usize, width: usize) -> Ahead {
        let far = prefetch
            && (rows >= FAR_MIN_ROWS
                || (rows >= FAR_MIN_ROWS_HUGE
                    && width >= LINE
                    && data_bytes >= tuning().far_min_data_bytes));
        let ahead = if far {
            far_rows(width)
        } else {
            NEAR_PREFETCH_LINES / (width.clamp(1, PREFETCH_MAX) / LINE + 1)
        };
        Ahead {
            rows: ahead.max(2),
            far,
            tail: true,
            by_sixteen: far && tuning().far_rows_by_sixteen,
            by_pieces: far && tuning().far_rows_by_pieces,
            to_lines: false,
        }
    }

    /// The same for a call whose output is `out_bytes` long.
    #[inline]
    pub(crate) fn storing(self, out_bytes: usize) -> Ahead {
        Ahead {
            to_lines: out_bytes >= tuning().lines_stored_min_out_bytes,
            ..self
        }
    }

    /// The same for slices of `width` bytes whose first bytes all lie at
    /// multiples of `align` (a power of two): those that cannot end on a
    /// line their first line's steps miss are spared the request for it.
    #[inline]
    pub(crate) fn aligned(self, width: usize, align: usize) -> Ahead {
        Ahead {
            tail: tail_line(width, align),
            ..self
        }
    }

    /// The loops' const parameter ([`NONE`], [`NEAR`] or [`FAR`]) for a
    /// call that prefetches at all if `prefetch`.
    #[inline]
    pub(crate) fn hint(self, prefetch: bool) -> u8 {
        match (self.far, prefetch) {
            (true, _) => FAR,
            (false, true) => NEAR,
            (false, false) => NONE,
        }
    }
}

/// Rows of `width` bytes a copy requests ahead, into L2, to keep
/// `machine::Tuning::far_prefetch_lines` lines in flight (at least 2, at
/// most [`PREFETCH_MAX_ROWS`]): the far calls' distance ([`Ahead`]), and the
/// row path's where it requests its rows as it copies them
/// (`machine::Tuning::rows_requested_ahead`).
#[inline]
pub(crate) fn far_rows(width: usize) -> usize {
    let w = width.clamp(1, PREFETCH_MAX);
    // A slice whose width divides a line or is a multiple of one lies on
    // whole lines in an aligned array (an element, a 64- or 256-byte row);
    // one of another width touches one more line than its width needs (a
    // 60-byte row almost always two).
    let lines = if w.is_multiple_of(LINE) || LINE.is_multiple_of(w) {
        w.div_ceil(LINE)
    } else {
        w / LINE + 2
    };
    (tuning().far_prefetch_lines / lines).clamp(2, PREFETCH_MAX_ROWS)
}

/// Whether a slice of `width` bytes that starts at a multiple of `align` (a
/// power of two) may end on a line that its lines taken [`LINE`] bytes
/// apart from its start miss (within [`PREFETCH_MAX`]): its first byte lies
/// at most `LINE - align` bytes into a line, so its last byte, `(width - 1)
/// % LINE` bytes into the last of those steps' lines, stays on it unless
/// that is `align` or more. A 4-byte element of a float32 array never
/// leaves its line; a 64-byte row of an array 16 bytes past a line (where
/// NumPy puts large buffers) always does. Each request spared is an
/// instruction a row: 2M float32 points took 6% less time without it.
pub(crate) fn tail_line(width: usize, align: usize) -> bool {
    let align = align.clamp(1, LINE);
    width > 1 && width <= PREFETCH_MAX && (width - 1) % LINE >= align
}

/// Asks the cache for the first [`PREFETCH_MAX`] bytes of the slice of
/// `bytes` at `p` (its first line, the lines after it, and, if `tail`, the
/// line of its last byte, which a slice that does not start on a line may
/// end on: see [`tail_line`]), into L2 if `far`, else into L1. A hint
/// only: never faults, whatever `p`.
#[inline(always)]
pub(crate) fn slice(p: *const u8, bytes: usize, far: bool, tail: bool) {
    // The first line; the loop below only runs for slices longer than one.
    line(p, far);
    let mut at = LINE;
    while at < bytes.min(PREFETCH_MAX) {
        line(p.wrapping_add(at), far);
        at += LINE;
    }
    if tail && bytes > 1 && bytes <= PREFETCH_MAX {
        line(p.wrapping_add(bytes - 1), far);
    }
}

/// Asks the cache for the line at `p`: into L2 if `far`, else into L1. A
/// hint only: it never faults and reads nothing the program sees, whatever
/// the address, so `p` need not point into anything.
///
/// Why L2 for long walks: a prefetch to L1 holds one of the core's few L1
/// miss buffers (about 24 on Zen) until its line arrives, which caps the
/// lines in flight whatever the distance; one to L2 uses the L2's (about
/// 64), and the copy's load then hits L2.
#[inline(always)]
pub(crate) fn line(p: *const u8, far: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        // SAFETY: prefetch is a hint that never faults and reads nothing
        // architecturally; the address need not be valid.
        unsafe {
            if far {
                _mm_prefetch::<_MM_HINT_T1>(p.cast());
            } else {
                _mm_prefetch::<_MM_HINT_T0>(p.cast());
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, far);
}

/// [`line`] at `p`, `p + 64`, ... while below `p + bytes`: the lines of a
/// run that starts on a line, or every line but the last of one that does
/// not (see [`span`]).
#[inline(always)]
pub(crate) fn lines(p: *const u8, bytes: usize, far: bool) {
    let mut at = 0;
    while at < bytes {
        line(p.wrapping_add(at), far);
        at += LINE;
    }
}

/// Every line the `bytes` bytes from `p` touch: [`lines`], then the last
/// byte's line when those missed it (a run that does not start on a line).
/// With `bytes` a constant it compiles to straight-line code.
#[inline(always)]
pub(crate) fn span(p: *const u8, bytes: usize, far: bool) {
    let Some(last) = bytes.checked_sub(1) else {
        return;
    };
    lines(p, bytes, far);
    if p.addr() % LINE + last % LINE >= LINE {
        line(p.wrapping_add(last), far);
    }
}

/// Orders this thread's non-temporal stores before its later stores (for
/// instance, the signal that its part of the output is done).
#[inline]
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions; SSE2 is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The addresses [`span`] would hint, by the same arithmetic.
    fn spanned(p: usize, bytes: usize) -> Vec<usize> {
        let mut hinted: Vec<usize> = (0..bytes).step_by(LINE).map(|at| p + at).collect();
        if bytes > 0 && p % LINE + (bytes - 1) % LINE >= LINE {
            hinted.push(p + bytes - 1);
        }
        hinted
    }

    /// Which calls prefetch far: every long one; a service-sized one only
    /// from a `data` beyond the last-level cache, and only for slices of a
    /// line or more (`FAR_MIN_ROWS_HUGE`).
    #[test]
    fn service_sized_calls_prefetch_far_only_for_slices_of_a_line_or_more() {
        let huge = tuning().far_min_data_bytes;
        let cached = tuning().prefetch_min_data_bytes;
        let far = |rows, data, width| Ahead::new(true, rows, data, width).far;
        // `ov_gnd8_xml1`'s 3,125 slices of 60 bytes from 153 MB, 4-byte
        // points: near; rows of 64 bytes and more: far.
        assert!(!far(3125, huge, 60));
        assert!(!far(4096, huge, 4));
        assert!(far(FAR_MIN_ROWS_HUGE, huge, LINE));
        assert!(far(4096, huge, 128));
        assert!(!far(FAR_MIN_ROWS_HUGE - 1, huge, 128));
        assert!(!far(4096, huge - 1, 128));
        // Long calls prefetch far whatever the width or the `data`.
        assert!(far(FAR_MIN_ROWS, cached, 4));
        assert!(far(FAR_MIN_ROWS, huge, 60));
        // And nothing prefetches where the plan does not.
        assert!(!Ahead::new(false, FAR_MIN_ROWS, huge, 128).far);
        // The near distance covers 32 rows of a slice narrower than a line.
        assert_eq!(Ahead::new(true, 3125, huge, 60).rows, NEAR_PREFETCH_LINES);
    }

    #[test]
    fn a_span_hints_every_line_it_touches_once() {
        for p in [0usize, 1, 4, 63, 64, 100] {
            for bytes in 0..300 {
                let lines_touched: Vec<usize> = if bytes == 0 {
                    vec![]
                } else {
                    (p / LINE..=(p + bytes - 1) / LINE).collect()
                };
                let mut got: Vec<usize> = spanned(p, bytes).iter().map(|a| a / LINE).collect();
                got.dedup();
                assert_eq!(got, lines_touched, "p={p} bytes={bytes}");
            }
        }
        // And the hints themselves are harmless on any address.
        span(std::ptr::null(), 4096, true);
        lines(usize::MAX as *const u8, 256, false);
        fence();
    }

    /// `tail_line` against every start a slice of its alignment can have
    /// within a line: the last byte's line must be requested exactly when
    /// some start puts it past the lines `slice` takes 64 bytes apart.
    #[test]
    fn the_last_line_is_requested_exactly_when_some_slice_ends_past_the_steps() {
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for width in 0..1100 {
                let missed = (0..LINE).step_by(align.min(LINE)).any(|start| {
                    let stepped = (0..width.min(PREFETCH_MAX)).step_by(LINE);
                    let last_line = (start + width.max(1) - 1) / LINE;
                    !stepped
                        .map(|at| (start + at) / LINE)
                        .any(|l| l == last_line)
                });
                let wanted = missed && width > 1 && width <= PREFETCH_MAX;
                assert_eq!(tail_line(width, align), wanted, "{width} B at {align}");
            }
        }
        // The cases the rule is for: float32 elements never need it, the
        // rows of a buffer 16 bytes past a line do.
        assert!(!tail_line(4, 4));
        assert!(tail_line(64, 16));
        assert!(!tail_line(64, 64));
        assert!(tail_line(60, 4));
    }
}
