//! The copy routines: the slices of one block of rows, at offsets computed
//! beforehand, copied into consecutive output rows with a loop specialised
//! for the slice's byte width and layout, with the next rows' bytes
//! prefetched when `data` is beyond the caches and, for huge outputs,
//! stores that bypass the cache.

use std::ptr;

use crate::hints::{self, Ahead, FAR, LINE, NEAR, NONE};
use crate::layout::{for_each_run, SliceLayout};
use crate::offsets::{prefetch_row, ZERO_FILL};
use crate::plan::Plan;

/// The one loop of the contiguous copies: for the first `$count` rows, row
/// `i`'s slice, at `src + offsets[i]`, is copied to `dst + i * width` by
/// `$move` (called as `ptr::copy_nonoverlapping` is), or zero-filled; with
/// `$pf` (a constant: [`NEAR`] or [`FAR`], see [`prefetch_row`]; the hint
/// must be known when the loop compiles, a test per row cost short calls
/// 5-10%), the slices `$ahead` rows ahead are requested meanwhile (their
/// last byte's line too if `$tail`: see `hints::tail_line`), also
/// those of the offsets past `$count` (the next block's first rows, which
/// the kernel computes before this copy: see [`lookahead`]). A macro rather
/// than a generic function: each routine then compiles exactly its own loop
/// (a generic one changed the machine code of some fixed widths).
///
/// Safety, for the routine that expands it: `$count <= offsets.len()`;
/// every offset addresses `width` readable bytes from `src`, or is the
/// zero-fill marker and `ZERO` is set; `dst` holds `$count * width`
/// writable bytes not overlapping `data`; `$move` accepts `width`.
macro_rules! copy_rows {
    ($src:ident, $offsets:ident, $count:ident, $dst:ident, $width:expr, $ahead:expr, $tail:expr, $pf:expr, $zero:ident, $move:path) => {{
        let ahead: usize = $ahead;
        let count: usize = $count;
        let rows = &$offsets[..count];
        // The rows that have a row `ahead` places after them to request
        // (every row but the last `ahead` of the call's offsets): their loop
        // tests nothing but its end, and `tail` is tested once, not a row
        // (a test and a reload a row were most of the loop of 4-byte points).
        let hinted = if $pf == NONE {
            0
        } else {
            count.min($offsets.len().saturating_sub(ahead))
        };
        if hinted > 0 {
            let later = &$offsets[ahead..ahead + hinted];
            if $tail {
                for (i, (&off, &next)) in rows[..hinted].iter().zip(later).enumerate() {
                    prefetch_row::<$zero>($src, next, $width, $pf == FAR, true);
                    copy_row!($src, off, $dst, i, $width, $zero, $move);
                }
            } else {
                for (i, (&off, &next)) in rows[..hinted].iter().zip(later).enumerate() {
                    prefetch_row::<$zero>($src, next, $width, $pf == FAR, false);
                    copy_row!($src, off, $dst, i, $width, $zero, $move);
                }
            }
        }
        for (i, &off) in rows.iter().enumerate().skip(hinted) {
            copy_row!($src, off, $dst, i, $width, $zero, $move);
        }
    }};
}

/// Row `$i` of a block ([`copy_rows`]): the slice at `$src + $off` copied
/// to `$dst + $i * $width` by `$move`, or zero-filled.
macro_rules! copy_row {
    ($src:ident, $off:ident, $dst:ident, $i:ident, $width:expr, $zero:ident, $move:path) => {{
        // SAFETY: row i of the block lies in `dst` (the caller of copy_rows).
        let d = unsafe { $dst.add($i * $width) };
        if $zero && $off == ZERO_FILL {
            // SAFETY: row i's `width` bytes from `d` lie in `dst` (caller).
            unsafe { ptr::write_bytes(d, 0, $width) };
        } else {
            // SAFETY: the source slice is inside `data` (caller), the
            // destination inside the output, they do not overlap, and
            // `$move` accepts `width` (caller).
            unsafe { $move($src.offset($off), d, $width) };
        }
    }};
}

/// Copies `W`-byte slices; `W` known at compile time becomes plain moves.
///
/// # Safety
/// As for [`copy_rows`] with `width = W`.
#[inline(always)]
unsafe fn copy_fixed<const W: usize, const PF: u8, const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    ahead: Ahead,
) {
    copy_rows!(
        src,
        offsets,
        count,
        dst,
        W,
        ahead.rows,
        ahead.tail,
        PF,
        ZERO,
        ptr::copy_nonoverlapping
    );
}

/// A streamed slice of `W` bytes (a multiple of 16) into a 16-byte aligned
/// `dst`: `W / 16` loads and non-temporal stores, none of [`stream_copy`]'s
/// tests of the alignment and the length (called as
/// `ptr::copy_nonoverlapping` is; `len` is `W`).
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, W)`; `dst` 16-byte aligned.
#[inline(always)]
unsafe fn stream_lines<const W: usize>(src: *const u8, dst: *mut u8, len: usize) {
    debug_assert!(len == W);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let mut at = 0;
        while at < W {
            // SAFETY: `at + 16 <= W` (W a multiple of 16): inside both
            // slices; `dst + at` is 16-byte aligned, as the store needs.
            unsafe {
                let v = _mm_loadu_si128(src.add(at).cast::<__m128i>());
                _mm_stream_si128(dst.add(at).cast::<__m128i>(), v);
            }
            at += 16;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from the caller.
    unsafe {
        ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// Copies `W`-byte slices (`W` a multiple of a line, 64 to 512) into a
/// 16-byte aligned `dst` by non-temporal stores of a whole line each where
/// a row covers one (see `machine::Tuning::whole_line_min_bytes` and
/// [`stream_line_stores`]), prefetching as [`copy_var`]. With `LANES` not
/// 0, every row's whole output lines come from `4 * LANES` bytes past a
/// line of `data` and are loaded a line at a time ([`shifted_lines`]).
///
/// # Safety
/// As for [`copy_rows`] with `width = W`; `dst` 16-byte aligned; only on a
/// CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[link_section = "ndgather_dispatched"]
unsafe fn stream_whole_lines<const ZERO: bool, const W: usize, const LANES: i32>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    ahead: Ahead,
) {
    debug_assert!(W.is_multiple_of(LINE) && dst.addr().is_multiple_of(16));
    if ahead.far {
        copy_rows!(
            src,
            offsets,
            count,
            dst,
            W,
            ahead.rows,
            ahead.tail,
            FAR,
            ZERO,
            stream_line_stores::<W, LANES>
        );
    } else {
        copy_rows!(
            src,
            offsets,
            count,
            dst,
            W,
            ahead.rows,
            ahead.tail,
            NEAR,
            ZERO,
            stream_line_stores::<W, LANES>
        );
    }
}

/// One slice of [`stream_whole_lines`] (called as `ptr::copy_nonoverlapping`
/// is; `len` is `W`): the bytes up to `dst`'s next line by 16-byte
/// non-temporal stores (none when `dst` starts on one), the whole lines
/// after them by one 64-byte store each, and what is left by 16-byte
/// stores again. In an output that does not start on a line (NumPy's large
/// buffers start 16 bytes past one) a row's last bytes and the next row's
/// first share a line, which the two rows' 16-byte stores fill together.
/// AMD kind, `rows_1m_256b` `out=` into such a buffer: all 16-byte stores
/// took 27 ms against 10.5 ms for a new array, line-aligned, whole lines
/// (docs/performance.md). With `LANES` not 0, the whole lines go by
/// [`shifted_lines`].
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, W)`; `dst` 16-byte aligned;
/// with `LANES` not 0, `src` as far past a line as [`shifted_lines`] asks
/// of the first whole output line's source; only on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[link_section = "ndgather_dispatched"]
unsafe fn stream_line_stores<const W: usize, const LANES: i32>(
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    use std::arch::x86_64::{
        _mm512_loadu_si512, _mm512_stream_si512, _mm_loadu_si128, _mm_stream_si128,
    };
    debug_assert!(len == W && dst.addr().is_multiple_of(16));
    let head = to_next_line(dst);
    let mut at = 0;
    // Every move below is inside the `W` bytes of both slices (`W` and
    // `head` are multiples of 16, `head <= 48 < W`), and the CPU has
    // AVX-512F (caller).
    while at < head {
        // SAFETY: `at + 16 <= head`; `dst + at` 16-byte aligned (`dst` is).
        unsafe { _mm_stream_si128(dst.add(at).cast(), _mm_loadu_si128(src.add(at).cast())) };
        at += 16;
    }
    let lines = (W - at) / LINE;
    if LANES != 0 && lines > 0 {
        // SAFETY: the `lines` whole lines from `dst + at`, which starts a
        // line, and the bytes of the row they take, are inside the `W`
        // bytes of both (`at + lines * 64 <= W`); `src + at` lies
        // `4 * LANES` bytes past a line (caller); AVX-512F (caller).
        unsafe { shifted_lines::<LANES>(src.add(at), dst.add(at), lines) };
        at += lines * LINE;
    }
    while at + LINE <= W {
        // SAFETY: `at + 64 <= W`; `dst + at` starts a line (`dst + head`
        // does), as the 64-byte store needs.
        unsafe { _mm512_stream_si512(dst.add(at).cast(), _mm512_loadu_si512(src.add(at).cast())) };
        at += LINE;
    }
    while at < W {
        // SAFETY: `at + 16 <= W`; `dst + at` 16-byte aligned.
        unsafe { _mm_stream_si128(dst.add(at).cast(), _mm_loadu_si128(src.add(at).cast())) };
        at += 16;
    }
}

/// [`stream_line_stores`]' whole lines for a source `4 * D` bytes past a
/// line (`D` 4, 8 or 12; `machine::Tuning::loads_by_line`): the
/// `lines + 1` lines the `lines * 64` bytes at `src` touch are each loaded
/// once, on their line, and every output line is the end of one and the
/// start of the next, joined in a register (`valignd`) and streamed to
/// `dst`. A 64-byte load at `src` would
/// straddle two lines every time: AMD kind, `rows_1m_256b` from NumPy's
/// `data` (16 bytes past a line) into a line-aligned `out=`, two threads,
/// 0.77-0.94x the time this way (docs/performance.md). The first and last
/// lines are loaded under a mask of the row's own bytes.
///
/// # Safety
/// `lines >= 1`; the `lines * 64` bytes from `src` readable, from `dst`
/// writable, `dst` on a line; `src` `4 * D` bytes past one; AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[link_section = "ndgather_dispatched"]
unsafe fn shifted_lines<const D: i32>(src: *const u8, dst: *mut u8, lines: usize) {
    use std::arch::x86_64::{
        _mm512_alignr_epi32, _mm512_load_si512, _mm512_maskz_loadu_epi32, _mm512_stream_si512,
    };
    debug_assert!(lines >= 1 && dst.addr().is_multiple_of(LINE));
    debug_assert_eq!(src.addr() % LINE, 4 * D as usize);
    // The line `src` lies on; its first `4 * D` bytes are not the row's.
    let base = src.wrapping_sub(4 * D as usize);
    // The row's 4-byte lanes of its first line (all but the first `D`),
    // and the rest, those of its last (the first `D`).
    let first_lanes: u16 = u16::MAX << D;
    // SAFETY: the lanes a mask leaves out are neither read nor faulted on
    // (AVX-512 masked loads), so every byte read is one of the `lines * 64`
    // from `src`: the first line's lanes from `src` on, the whole lines
    // between (base + 64 .. base + 64 * lines, inside as `src > base`), and
    // the last line's lanes before `base + 64 * lines + 4 * D`, which is
    // `src + 64 * lines`; the aligned loads are on a line; each store is on
    // one of `dst`'s `lines` lines; AVX-512F (caller).
    unsafe {
        let mut low = _mm512_maskz_loadu_epi32(first_lanes, base.cast());
        for j in 1..lines {
            let high = _mm512_load_si512(base.add(j * LINE).cast());
            _mm512_stream_si512(
                dst.add((j - 1) * LINE).cast(),
                _mm512_alignr_epi32::<D>(high, low),
            );
            low = high;
        }
        let high = _mm512_maskz_loadu_epi32(!first_lanes, base.add(lines * LINE).cast());
        _mm512_stream_si512(
            dst.add((lines - 1) * LINE).cast(),
            _mm512_alignr_epi32::<D>(high, low),
        );
    }
}

/// Copies `W`-byte slices (`W` a multiple of a line, 64 to 1,024) into a
/// `dst` 16, 32 or 48 bytes past a line by non-temporal stores of whole
/// lines only, but for the block's first and last bytes: the rows lie
/// back to back in `dst`, so each output line is the end of one 64-byte
/// piece of the rows and the start of the next, a row's last bytes joined
/// with the next row's first in a register (`vpermt2d`, the shift a
/// run-time index) and streamed with them. [`stream_line_stores`] fills
/// such a line by 16-byte stores from two rows, which Intel cores write
/// out as partial lines: Intel Xeon model 207 VM, `out=` into NumPy's
/// buffers (16 bytes past a line) took 1.2-1.7x the time of a line-aligned
/// one (docs/performance.md). Where `machine::Tuning::carries_lines` says.
/// Prefetches as [`stream_whole_lines`].
///
/// # Safety
/// As for [`copy_rows`] with `width = W`; `dst` 16-byte aligned and not on
/// a line; only on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[link_section = "ndgather_dispatched"]
unsafe fn stream_carried_lines<const ZERO: bool, const W: usize>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    ahead: Ahead,
) {
    use std::arch::x86_64::{
        __m512i, _mm512_add_epi32, _mm512_loadu_si512, _mm512_permutex2var_epi32,
        _mm512_set1_epi32, _mm512_setr_epi32, _mm512_setzero_si512, _mm512_stream_si512,
        _mm_loadu_si128, _mm_stream_si128,
    };
    debug_assert!(W.is_multiple_of(LINE) && dst.addr().is_multiple_of(16));
    debug_assert!(!dst.addr().is_multiple_of(LINE));
    let rows = &offsets[..count];
    if rows.is_empty() {
        return;
    }
    // The bytes of the output's first line that are the block's (`head`),
    // and of its last (`LINE - head`).
    let head = LINE - dst.addr() % LINE;
    // Lanes 0..16 of a join are lanes `head / 4 ..` of `(last, next)` taken
    // as one 32-lane vector: the last `LINE - head` bytes of `last`, then
    // the first `head` bytes of `next`.
    let join = _mm512_add_epi32(
        _mm512_set1_epi32((head / 4) as i32),
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    );
    // Piece `j` of the row at `off`: its bytes `64 * j ..`, or zeros.
    let piece = |off: isize, j: usize| -> __m512i {
        if ZERO && off == ZERO_FILL {
            _mm512_setzero_si512()
        } else {
            // SAFETY: `64 * j + 64 <= W`, inside the row's slice at `off`
            // (caller); AVX-512F (caller).
            unsafe { _mm512_loadu_si512(src.offset(off).add(j * LINE).cast()) }
        }
    };
    // 16 bytes of the row at `off`, from its byte `at`, streamed to `to`.
    let sixteen = |off: isize, at: usize, to: *mut u8| {
        // SAFETY: `at + 16 <= W`, inside the row's slice (caller); `to` is
        // one of the block's first or last 16-byte aligned pieces of `dst`
        // (below); AVX-512F (caller).
        unsafe {
            let v = if ZERO && off == ZERO_FILL {
                std::arch::x86_64::_mm_setzero_si128()
            } else {
                _mm_loadu_si128(src.offset(off).add(at).cast())
            };
            _mm_stream_si128(to.cast(), v);
        }
    };
    let mut at = 0;
    while at < head {
        sixteen(rows[0], at, dst.wrapping_add(at));
        at += 16;
    }
    // Every line from `dst + head` on is whole in `dst`: the first of the
    // block's `count * W / 64 - 1` whole lines (`dst` holds `count * W`
    // bytes, `head` and `LINE - head` of them in its partial lines).
    let mut line = dst.wrapping_add(head);
    let mut last = piece(rows[0], 0);
    for (i, &off) in rows.iter().enumerate() {
        if let Some(&next) = offsets.get(i + ahead.rows) {
            prefetch_row::<ZERO>(src, next, W, ahead.far, ahead.tail);
        }
        for j in usize::from(i == 0)..W / LINE {
            let next = piece(off, j);
            // SAFETY: `line` starts a line (as `dst + head` does) and is
            // one of the block's whole lines: one a piece after the first;
            // AVX-512F (caller).
            unsafe {
                _mm512_stream_si512(line.cast(), _mm512_permutex2var_epi32(last, join, next))
            };
            line = line.wrapping_add(LINE);
            last = next;
        }
    }
    // The last row's last `LINE - head` bytes, in the block's last line.
    let tail = LINE - head;
    let mut at = 0;
    while at < tail {
        sixteen(rows[count - 1], W - tail + at, line.wrapping_add(at));
        at += 16;
    }
}

/// Rows up to this width are copied with two overlapping moves rather than
/// a call to `memcpy`.
pub(crate) const SMALL_ROW: usize = 64;

/// The row path (`rows`) copies rows up to this width (and over
/// [`SMALL_ROW`]) by [`copy_medium_rows`]' inline 32-byte moves rather than a
/// call to `memcpy`: on the Intel kind, 256 cached rows of 140 to 384 bytes
/// took 0.75-0.85x the time; from 700 bytes the two were even. The general
/// kernel's loop, with its prefetches, took 1.3-1.4x the time with them on
/// 4,096-8,192 rows of 140-200 bytes there, so it keeps `memcpy`, but for
/// far calls on CPUs without AVX-512 ([`copy_far_pieces`],
/// `machine::Tuning::far_rows_by_pieces`; docs/performance.md).
pub(crate) const MEDIUM_ROW: usize = 512;

/// 16 bytes that load and store as one vector move.
#[cfg(target_arch = "x86_64")]
type V16 = std::arch::x86_64::__m128i;
#[cfg(not(target_arch = "x86_64"))]
type V16 = u128;

/// 32 bytes as two vector moves (a marker: see its [`Move`]). A `[V16; 2]`
/// moved as a whole went through the stack: `ov_gnd8_xml1`'s 60-byte slices
/// then took 14 us on two threads, against 11 us (docs/performance.md).
#[derive(Clone, Copy)]
struct V32;

/// Copies `width` bytes, `n <= width <= 2 * n` for the `n` bytes an `M`
/// moves (its size; 32 for [`V32`]), as two possibly overlapping moves of
/// `M`: no loop, no call.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, width)`, and the bound above.
#[inline(always)]
unsafe fn two_moves<M: Move>(src: *const u8, dst: *mut u8, width: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { M::two_moves(src, dst, width) }
}

/// A width [`two_moves`] copies in two moves.
trait Move: Copy {
    /// As [`two_moves`].
    ///
    /// # Safety
    /// As for [`two_moves`].
    unsafe fn two_moves(src: *const u8, dst: *mut u8, width: usize);
}

macro_rules! plain_move {
    ($($t:ty),*) => {$(
        impl Move for $t {
            #[inline(always)]
            unsafe fn two_moves(src: *const u8, dst: *mut u8, width: usize) {
                // SAFETY: forwarded from the caller.
                unsafe { plain_two_moves::<$t>(src, dst, width) }
            }
        }
    )*};
}
plain_move!(V16, u64, u32, u16, u8);

impl Move for V32 {
    #[inline(always)]
    unsafe fn two_moves(src: *const u8, dst: *mut u8, width: usize) {
        // SAFETY: 32 <= width (caller), so the four moves stay inside the
        // `width` bytes of `src` and `dst`; unaligned moves take any address.
        unsafe {
            let head = src.cast::<V16>().read_unaligned();
            let head2 = src.add(16).cast::<V16>().read_unaligned();
            dst.cast::<V16>().write_unaligned(head);
            dst.add(16).cast::<V16>().write_unaligned(head2);
            let tail = src.add(width - 32).cast::<V16>().read_unaligned();
            let tail2 = src.add(width - 16).cast::<V16>().read_unaligned();
            dst.add(width - 32).cast::<V16>().write_unaligned(tail);
            dst.add(width - 16).cast::<V16>().write_unaligned(tail2);
        }
    }
}

/// [`two_moves`] for a type moved by one instruction.
///
/// # Safety
/// As for [`two_moves`].
#[inline(always)]
unsafe fn plain_two_moves<M: Copy>(src: *const u8, dst: *mut u8, width: usize) {
    let n = std::mem::size_of::<M>();
    // SAFETY: n <= width, so both moves stay inside the `width` bytes of
    // `src` and `dst` (caller); unaligned reads and writes take any address.
    unsafe {
        let head = src.cast::<M>().read_unaligned();
        let tail = src.add(width - n).cast::<M>().read_unaligned();
        dst.cast::<M>().write_unaligned(head);
        dst.add(width - n).cast::<M>().write_unaligned(tail);
    }
}

/// Copies `width <= SMALL_ROW` bytes as two possibly overlapping moves of
/// the largest power-of-two size that fits.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, width)`.
#[inline(always)]
pub(crate) unsafe fn copy_small(src: *const u8, dst: *mut u8, width: usize) {
    // SAFETY: each arm's type is at most `width` and at least half of it.
    unsafe {
        match width {
            32.. => two_moves::<V32>(src, dst, width),
            16.. => two_moves::<V16>(src, dst, width),
            8.. => two_moves::<u64>(src, dst, width),
            4.. => two_moves::<u32>(src, dst, width),
            2.. => two_moves::<u16>(src, dst, width),
            1 => two_moves::<u8>(src, dst, width),
            _ => {}
        }
    }
}

/// The rows at `offsets` in `table`, each `width` bytes, `SMALL_ROW <
/// width <= MEDIUM_ROW`, into consecutive rows of `out`: a row as 32-byte
/// pieces from its start and one more ending at its last byte (overlapping
/// the one before), inline moves instead of `memcpy`'s call and dispatch.
/// The count of pieces is a constant, chosen once for all the rows, so
/// that a row is a straight line of moves: the loop with the count known
/// only at run time took 65 instructions a 140-byte row (callgrind,
/// `ov_gnd8_xml2`), against 31. On a CPU with AVX a piece is one move, not
/// two, and the pieces are stored in address order (written as plain
/// copies, the compiler stored a row's pieces last to first, and the call
/// was no faster): `ov_gnd8_xml2` `out=` 1.58 -> 1.48 us on the Intel
/// kind (docs/performance.md).
///
/// With `ahead` above 0, each row's lines are requested into L2 `ahead`
/// rows before its copy, as the far loop requests them (`hints::far_rows`),
/// the first `ahead` rows left to the caller: where one core tracks few
/// misses at once, requests spread over the copy hide more of each miss
/// than all of them made before it (`machine::Tuning::rows_requested_ahead`).
///
/// # Panics
/// If an offset's row is not inside `table` (the caller checked them all),
/// or `width` is out of its range.
pub(crate) fn copy_medium_rows(
    table: &[u8],
    offsets: &[usize],
    width: usize,
    out: &mut [u8],
    ahead: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: this CPU has AVX (checked just now).
        return unsafe { copy_medium_rows_avx(table, offsets, width, out, ahead) };
    }
    medium_rows_by_pieces(table, offsets, width, out, ahead);
}

/// [`copy_medium_rows`] compiled for AVX: each 32-byte piece one move.
///
/// # Safety
/// Only on a CPU with AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[link_section = "ndgather_dispatched"]
unsafe fn copy_medium_rows_avx(
    table: &[u8],
    offsets: &[usize],
    width: usize,
    out: &mut [u8],
    ahead: usize,
) {
    medium_rows_by_pieces(table, offsets, width, out, ahead);
}

/// [`copy_medium_rows`]' body, inlined into each of its two compilations.
#[inline(always)]
fn medium_rows_by_pieces(
    table: &[u8],
    offsets: &[usize],
    width: usize,
    out: &mut [u8],
    ahead: usize,
) {
    #[inline(always)]
    fn rows<const PIECES: usize>(
        table: &[u8],
        offsets: &[usize],
        width: usize,
        out: &mut [u8],
        ahead: usize,
    ) {
        assert!(32 * (PIECES - 1) < width && width <= 32 * PIECES);
        let copy = |dst: &mut [u8], from: usize| {
            let src = &table[from..from + width];
            // SAFETY: `src` and `dst` are distinct slices of `width` bytes
            // (`chunks_exact_mut`), in the range `move_pieces` asks (above).
            unsafe { move_pieces::<PIECES>(src.as_ptr(), dst.as_mut_ptr(), width) };
        };
        let mut rows = out.chunks_exact_mut(width).zip(offsets);
        if ahead > 0 {
            // The rows with one `ahead` places after them; `later` first in
            // the zip, so that its end takes no row from `rows`.
            let later = offsets.get(ahead..).unwrap_or_default();
            for (&next, (dst, &from)) in later.iter().zip(rows.by_ref()) {
                // Every line of the row: those of its first `32 * (PIECES -
                // 1) + 1` bytes, a constant count, and its last byte's.
                let p = table[next..next + width].as_ptr();
                hints::lines(p, 32 * (PIECES - 1) + 1, true);
                hints::line(p.wrapping_add(width - 1), true);
                copy(dst, from);
            }
        }
        for (dst, &from) in rows {
            copy(dst, from);
        }
    }
    macro_rules! by_pieces {
        ($($p:literal)*) => {
            match width.div_ceil(32) {
                $($p => rows::<$p>(table, offsets, width, out, ahead),)*
                _ => panic!("copy_medium_rows: width {width} outside 65..=MEDIUM_ROW"),
            }
        };
    }
    // The arms cover SMALL_ROW < width <= MEDIUM_ROW.
    const _: () = assert!(SMALL_ROW == 2 * 32 && MEDIUM_ROW == 16 * 32);
    by_pieces!(3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// Copies the `width` bytes at `src` to `dst` as `PIECES` 32-byte pieces:
/// `PIECES - 1` from the start and one ending at the last byte (overlapping
/// the one before). A straight line of moves, no call, no loop.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, width)`;
/// `32 * (PIECES - 1) < width <= 32 * PIECES` and `PIECES >= 2`, so that the
/// first `PIECES - 1` pieces end inside the slices and the last one starts
/// at `width - 32 > 0`.
#[inline(always)]
unsafe fn move_pieces<const PIECES: usize>(src: *const u8, dst: *mut u8, width: usize) {
    debug_assert!(PIECES >= 2 && 32 * (PIECES - 1) < width && width <= 32 * PIECES);
    // SAFETY: every piece lies inside both slices (the bound above).
    unsafe {
        for k in 0..PIECES - 1 {
            move_piece(src.add(32 * k), dst.add(32 * k));
        }
        move_piece(src.add(width - 32), dst.add(width - 32));
    }
}

/// Copies the 32 bytes at `src` to `dst`: one move with AVX (the compiler
/// joins the two halves), two without. Not [`V32`]'s `two_moves` of 32
/// bytes, whose head and tail are then the same bytes moved twice (the
/// compiler cannot drop either: `src` and `dst` might overlap).
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, 32)`.
#[inline(always)]
unsafe fn move_piece(src: *const u8, dst: *mut u8) {
    // SAFETY: 32 bytes at both (caller); unaligned moves take any address.
    unsafe {
        let head = src.cast::<V16>().read_unaligned();
        let tail = src.add(16).cast::<V16>().read_unaligned();
        dst.cast::<V16>().write_unaligned(head);
        dst.add(16).cast::<V16>().write_unaligned(tail);
    }
}

/// [`copy_var`]'s far rows of `SMALL_ROW < width <= MEDIUM_ROW` bytes on a
/// CPU whose `memcpy` moves at most 32 bytes at once
/// (`machine::Tuning::far_rows_by_pieces`): each row by [`move_pieces`],
/// the row path's inline moves (one instruction a piece with AVX), with the
/// same prefetch far ahead. Fewer instructions a row keep more rows' misses
/// in flight.
///
/// # Safety
/// As for [`copy_rows`]; `SMALL_ROW < width <= MEDIUM_ROW`.
unsafe fn copy_far_pieces<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    width: usize,
    ahead: Ahead,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: forwarded from the caller; this CPU has AVX (checked
        // just now).
        return unsafe { copy_far_pieces_avx::<ZERO>(src, offsets, count, dst, width, ahead) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { far_pieces_rows::<ZERO>(src, offsets, count, dst, width, ahead) }
}

/// [`copy_far_pieces`] compiled for AVX: each 32-byte piece one move.
///
/// # Safety
/// As for [`copy_far_pieces`]; only on a CPU with AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[link_section = "ndgather_dispatched"]
unsafe fn copy_far_pieces_avx<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    width: usize,
    ahead: Ahead,
) {
    // SAFETY: forwarded from the caller.
    unsafe { far_pieces_rows::<ZERO>(src, offsets, count, dst, width, ahead) }
}

/// [`copy_far_pieces`]' body, inlined into each of its two compilations:
/// one loop for each count of pieces, chosen once for all the rows.
///
/// # Safety
/// As for [`copy_far_pieces`].
#[inline(always)]
unsafe fn far_pieces_rows<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    width: usize,
    ahead: Ahead,
) {
    let rows = ahead.rows;
    macro_rules! by_pieces {
        ($($p:literal)*) => {
            match width.div_ceil(32) {
                // SAFETY (every arm): the caller's contract for copy_rows,
                // and `32 * ($p - 1) < width <= 32 * $p` as `move_pieces`
                // asks.
                $($p => copy_rows!(src, offsets, count, dst, width, rows, ahead.tail, FAR, ZERO, move_pieces::<$p>),)*
                // Outside the range the caller keeps to: `memcpy`, as before.
                _ => copy_rows!(src, offsets, count, dst, width, rows, ahead.tail, FAR, ZERO, move_run::<false, 0>),
            }
        };
    }
    // The arms cover SMALL_ROW < width <= MEDIUM_ROW.
    const _: () = assert!(SMALL_ROW == 2 * 32 && MEDIUM_ROW == 16 * 32);
    by_pieces!(3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// Copies slices of a run-time `width <= SMALL_ROW` (a width with no fixed
/// copy, say 60 bytes): the moves are chosen once per block rather than
/// once per row.
///
/// # Safety
/// As for [`copy_rows`].
unsafe fn copy_small_rows<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    width: usize,
    pf: u8,
    ahead: Ahead,
) {
    #[inline(always)]
    unsafe fn rows<M: Move, const PF: u8, const ZERO: bool>(
        src: *const u8,
        offsets: &[isize],
        count: usize,
        dst: *mut u8,
        width: usize,
        ahead: Ahead,
    ) {
        copy_rows!(
            src,
            offsets,
            count,
            dst,
            width,
            ahead.rows,
            ahead.tail,
            PF,
            ZERO,
            two_moves::<M>
        );
    }
    macro_rules! by_width {
        ($($m:ty => $lo:literal,)*) => {
            match width {
                $($lo.. => {
                    // SAFETY: forwarded; $lo <= width < 2 * $lo (or 64).
                    unsafe {
                        match pf {
                            FAR => rows::<$m, FAR, ZERO>(src, offsets, count, dst, width, ahead),
                            NEAR => rows::<$m, NEAR, ZERO>(src, offsets, count, dst, width, ahead),
                            _ => rows::<$m, NONE, ZERO>(src, offsets, count, dst, width, ahead),
                        }
                    }
                })*
                _ => {}
            }
        };
    }
    by_width!(V32 => 32, V16 => 16, u64 => 8, u32 => 4, u16 => 2, u8 => 1,);
}

/// Copies slices of a width known only at run time (`W` = 0), or of `W`
/// bytes streamed into a 16-byte aligned `dst` (a multiple of 16), with
/// non-temporal stores if `STREAM`. Prefetches whether or not `data` is
/// beyond the caches.
///
/// # Safety
/// As for [`copy_rows`]; with `W` != 0, `STREAM`, `width == W` and `dst`
/// 16-byte aligned.
unsafe fn copy_var<const STREAM: bool, const ZERO: bool, const W: usize>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    width: usize,
    ahead: Ahead,
) {
    debug_assert!(W == 0 || (STREAM && W == width && dst.addr().is_multiple_of(16)));
    let rows = ahead.rows;
    // The loop for one prefetch distance (`$pf`) and mover of a slice.
    macro_rules! copy_with {
        ($pf:expr, $move:path) => {
            copy_rows!(src, offsets, count, dst, width, rows, ahead.tail, $pf, ZERO, $move)
        };
    }
    if ahead.far && ahead.by_sixteen {
        copy_with!(FAR, move_far_run::<STREAM, W>);
    } else if !STREAM
        && ahead.far
        && ahead.by_pieces
        && !ahead.to_lines
        && (SMALL_ROW + 1..=MEDIUM_ROW).contains(&width)
    {
        // SAFETY: forwarded from the caller; the width is in range.
        unsafe { copy_far_pieces::<ZERO>(src, offsets, count, dst, width, ahead) };
    } else if !STREAM && ahead.to_lines && ahead.far {
        copy_with!(FAR, copy_to_lines);
    } else if !STREAM && ahead.to_lines {
        copy_with!(NEAR, copy_to_lines);
    } else if ahead.far {
        copy_with!(FAR, move_run::<STREAM, W>);
    } else {
        copy_with!(NEAR, move_run::<STREAM, W>);
    }
}

/// One slice of [`copy_var`], streamed if `STREAM` (by [`stream_lines`]
/// when `W` != 0).
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`; as [`copy_var`] says
/// with `W` != 0.
#[inline(always)]
unsafe fn move_run<const STREAM: bool, const W: usize>(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if STREAM && W != 0 {
            stream_lines::<W>(src, dst, len);
        } else if STREAM {
            stream_copy(src, dst, len);
        } else {
            ptr::copy_nonoverlapping(src, dst, len);
        }
    }
}

/// The bytes from `dst` to the start of the next line: 0 on a line.
#[inline(always)]
fn to_next_line(dst: *const u8) -> usize {
    dst.addr().wrapping_neg() % LINE
}

/// `ptr::copy_nonoverlapping(src, dst, len)` with its stores on lines:
/// a `len` of four lines or more to a `dst` that does not start on a line
/// is copied as its part up to `dst`'s next line, then `memcpy` of the
/// whole lines that follow, then the rest (each end within one line).
/// `memcpy` stores a copy of up to eight of its vectors (512 bytes with
/// AVX-512) where it falls, and the buffers NumPy allocates start 16 bytes
/// past a line, so that every 64-byte store into such an `out=` writes two
/// lines; past a core's L2 that costs more than the moves at the ends
/// (`machine::Tuning::lines_stored_min_out_bytes`). Below four lines the
/// ends cost more (144-byte rows: 1.2x the time). docs/performance.md.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`.
#[inline(always)]
unsafe fn copy_to_lines(src: *const u8, dst: *mut u8, len: usize) {
    let head = to_next_line(dst);
    // SAFETY: `head < LINE < len` in the second arm, so the head, the
    // whole lines after it and the rest (below a line) each lie inside the
    // `len` bytes of both (caller); `copy_small` takes up to `SMALL_ROW`
    // (a line).
    unsafe {
        if head == 0 || len < 4 * LINE {
            ptr::copy_nonoverlapping(src, dst, len);
        } else {
            copy_small(src, dst, head);
            let body = (len - head) / LINE * LINE;
            ptr::copy_nonoverlapping(src.add(head), dst.add(head), body);
            let done = head + body;
            copy_small(src.add(done), dst.add(done), len - done);
        }
    }
}

/// [`move_run`] for a call whose rows come from beyond the caches
/// (`Ahead::far`), on a CPU that copies them better by 16-byte moves
/// (`Ahead::by_sixteen`, from `machine::Tuning::far_rows_by_sixteen`): a
/// slice of a multiple of 16 bytes up to [`PIECES_MAX`]
/// from a source that does not start on a line is copied by
/// [`copy_by_sixteen`] instead of `memcpy`, whose 32- and 64-byte moves
/// there straddle two lines every other move or every move (a NumPy
/// array's large buffers start 16 bytes past a line), each such load then
/// waiting on two lines from memory; 16-byte moves at a multiple of 16
/// never straddle. AMD kind, 4,096 random 512-byte rows of a 512 MiB table
/// a call, one thread: 206-215 -> 188-203 us. From a table in the caches
/// `memcpy`'s wider moves were 0.96x the time, and on Intel cores from a
/// far table 0.75-0.90x (docs/performance.md).
///
/// # Safety
/// As for [`move_run`].
#[inline(always)]
unsafe fn move_far_run<const STREAM: bool, const W: usize>(
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if !STREAM
            && len <= PIECES_MAX
            && len.is_multiple_of(16)
            && !src.addr().is_multiple_of(LINE)
        {
            copy_by_sixteen(src, dst, len);
        } else {
            move_run::<STREAM, W>(src, dst, len);
        }
    }
}

/// The widest slice [`move_far_run`] copies by 16-byte moves: longer ones
/// stream from the hardware's prefetch once started.
const PIECES_MAX: usize = crate::hints::PREFETCH_MAX;

/// Copies `len` bytes, a multiple of 16, in 16-byte moves.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`; `len` a multiple of 16.
#[inline(always)]
unsafe fn copy_by_sixteen(src: *const u8, dst: *mut u8, len: usize) {
    let mut at = 0;
    while at < len {
        // SAFETY: at + 16 <= len (a multiple of 16), inside both (caller);
        // unaligned moves take any address. The intrinsics, not a plain
        // loop of reads and writes, which LLVM turns back into `memcpy`.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::x86_64::{_mm_loadu_si128, _mm_storeu_si128};
                _mm_storeu_si128(dst.add(at).cast(), _mm_loadu_si128(src.add(at).cast()));
            }
            #[cfg(not(target_arch = "x86_64"))]
            ptr::copy_nonoverlapping(src.add(at), dst.add(at), 16);
        }
        at += 16;
    }
}

/// Copies slices that are not contiguous in `data`: runs of `run` bytes at
/// the positions of `outer`.
///
/// # Safety
/// Every offset is the start of a slice of `data` whose runs are all
/// readable, or is the zero-fill marker and `ZERO` is set; `dst` holds
/// `offsets.len() * slice_bytes` writable bytes.
unsafe fn copy_strided<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
    run: usize,
    outer: &[(usize, isize)],
    slice_bytes: usize,
) {
    for (i, &off) in offsets[..count].iter().enumerate() {
        // SAFETY: row i of the block lies in `dst` (caller).
        let mut d = unsafe { dst.add(i * slice_bytes) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: row i's `slice_bytes` bytes from `d` lie in `dst`
            // (caller).
            unsafe { ptr::write_bytes(d, 0, slice_bytes) };
            continue;
        }
        for_each_run(outer, |at| {
            // SAFETY: `off + at` is the offset of one run of this slice
            // (caller); `d` walks the row's `slice_bytes` bytes one run at
            // a time.
            unsafe {
                ptr::copy_nonoverlapping(src.offset(off + at), d, run);
                d = d.add(run);
            }
        });
    }
}

/// The `LANES` of [`stream_whole_lines`] for `plan`'s rows streamed to
/// `dst`: where the machine loads such rows a line at a time
/// (`machine::Tuning::loads_by_line`) and every slice lies as far past a
/// line (`Plan::slice_phase`), 4, 8 or 12 when that puts the source of
/// each row's first whole output line 16, 32 or 48 bytes past one; else 0
/// (loaded where it lies). Every output row lies as `dst` does in its
/// lines, their widths being multiples of a line.
fn lanes_to_shift(plan: &Plan<'_>, dst: *const u8) -> i32 {
    if !crate::machine::tuning().loads_by_line {
        return 0;
    }
    let Some(phase) = plan.slice_phase() else {
        return 0;
    };
    let head = to_next_line(dst);
    match (phase + head) % LINE {
        16 => 4,
        32 => 8,
        48 => 12,
        _ => 0,
    }
}

/// Copies the slices of the first `count` rows of `offsets` into
/// consecutive rows at `dst`, dispatching on the slice layout; the offsets
/// after them are only prefetched from.
///
/// # Safety
/// As for the copy functions: `count <= offsets.len()`; offsets from
/// [`compute_offsets`](crate::offsets::compute_offsets) on the same
/// plan with the same `ZERO`, `dst` exactly `count * plan.slice_bytes`
/// bytes.
pub(crate) unsafe fn copy_block<const ZERO: bool>(
    plan: &Plan<'_>,
    ahead: Ahead,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
) {
    // SAFETY: `data` is a checked view, so by the checked-view invariant (a)
    // the pointer is within its bytes or one past them (an empty `data` has
    // only zero-filled rows).
    let src = unsafe { plan.data.bytes.as_ptr().add(plan.data.offset) };
    // How the loops of fixed and short widths prefetch (the others always
    // do, near or far).
    let pf = ahead.hint(plan.prefetch);
    macro_rules! fixed {
        ($($w:literal)*) => {
            match plan.slice {
                // `plan.stream` is only set for contiguous slices (`plan::streams`).
                SliceLayout::Contiguous { bytes } if plan.stream => {
                    #[cfg(target_arch = "x86_64")]
                    if dst.addr() % 16 == 0
                        && !dst.addr().is_multiple_of(LINE)
                        && matches!(bytes, 64 | 128 | 256 | 512 | 1024)
                        && crate::machine::tuning().carries_lines
                        && bytes >= crate::machine::tuning().whole_line_min_bytes
                        && crate::machine::wide_vectors()
                    {
                        // SAFETY: forwarded from the caller; `dst` is
                        // 16-byte aligned and not on a line; the CPU has
                        // AVX-512F (`wide_vectors`).
                        unsafe {
                            match bytes {
                                64 => stream_carried_lines::<ZERO, 64>(src, offsets, count, dst, ahead),
                                128 => stream_carried_lines::<ZERO, 128>(src, offsets, count, dst, ahead),
                                256 => stream_carried_lines::<ZERO, 256>(src, offsets, count, dst, ahead),
                                512 => stream_carried_lines::<ZERO, 512>(src, offsets, count, dst, ahead),
                                _ => stream_carried_lines::<ZERO, 1024>(src, offsets, count, dst, ahead),
                            }
                        }
                        return;
                    }
                    #[cfg(target_arch = "x86_64")]
                    if dst.addr() % 16 == 0
                        && matches!(bytes, 64 | 128 | 256 | 512)
                        && bytes >= crate::machine::tuning().whole_line_min_bytes
                        && crate::machine::wide_vectors()
                    {
                        // SAFETY: forwarded from the caller; `dst` is
                        // 16-byte aligned, and so is every row (its width a
                        // multiple of a line); with `LANES` not 0, every
                        // row's first whole output line has its source that
                        // far past a line (`lanes_to_shift`); the CPU has
                        // AVX-512F (`wide_vectors`).
                        unsafe {
                            match (bytes, lanes_to_shift(plan, dst.cast_const())) {
                                (64, 0) => stream_whole_lines::<ZERO, 64, 0>(src, offsets, count, dst, ahead),
                                (128, 0) => stream_whole_lines::<ZERO, 128, 0>(src, offsets, count, dst, ahead),
                                (256, 0) => stream_whole_lines::<ZERO, 256, 0>(src, offsets, count, dst, ahead),
                                (_, 0) => stream_whole_lines::<ZERO, 512, 0>(src, offsets, count, dst, ahead),
                                (64, 4) => stream_whole_lines::<ZERO, 64, 4>(src, offsets, count, dst, ahead),
                                (128, 4) => stream_whole_lines::<ZERO, 128, 4>(src, offsets, count, dst, ahead),
                                (256, 4) => stream_whole_lines::<ZERO, 256, 4>(src, offsets, count, dst, ahead),
                                (_, 4) => stream_whole_lines::<ZERO, 512, 4>(src, offsets, count, dst, ahead),
                                (64, 8) => stream_whole_lines::<ZERO, 64, 8>(src, offsets, count, dst, ahead),
                                (128, 8) => stream_whole_lines::<ZERO, 128, 8>(src, offsets, count, dst, ahead),
                                (256, 8) => stream_whole_lines::<ZERO, 256, 8>(src, offsets, count, dst, ahead),
                                (_, 8) => stream_whole_lines::<ZERO, 512, 8>(src, offsets, count, dst, ahead),
                                (64, _) => stream_whole_lines::<ZERO, 64, 12>(src, offsets, count, dst, ahead),
                                (128, _) => stream_whole_lines::<ZERO, 128, 12>(src, offsets, count, dst, ahead),
                                (256, _) => stream_whole_lines::<ZERO, 256, 12>(src, offsets, count, dst, ahead),
                                (_, _) => stream_whole_lines::<ZERO, 512, 12>(src, offsets, count, dst, ahead),
                            }
                        }
                        return;
                    }
                    // SAFETY: (every arm) forwarded from the caller; the
                    // fixed ones have `dst` 16-byte aligned, as every row
                    // then is (their widths are multiples of 16).
                    unsafe {
                        match bytes {
                            64 if dst.addr() % 16 == 0 => copy_var::<true, ZERO, 64>(src, offsets, count, dst, 64, ahead),
                            128 if dst.addr() % 16 == 0 => copy_var::<true, ZERO, 128>(src, offsets, count, dst, 128, ahead),
                            256 if dst.addr() % 16 == 0 => copy_var::<true, ZERO, 256>(src, offsets, count, dst, 256, ahead),
                            512 if dst.addr() % 16 == 0 => copy_var::<true, ZERO, 512>(src, offsets, count, dst, 512, ahead),
                            _ => copy_var::<true, ZERO, 0>(src, offsets, count, dst, bytes, ahead),
                        }
                    }
                }
                $(SliceLayout::Contiguous { bytes: $w } => {
                    // SAFETY: forwarded from the caller.
                    unsafe {
                        match pf {
                            FAR => copy_fixed::<$w, FAR, ZERO>(src, offsets, count, dst, ahead),
                            NEAR => copy_fixed::<$w, NEAR, ZERO>(src, offsets, count, dst, ahead),
                            _ => copy_fixed::<$w, NONE, ZERO>(src, offsets, count, dst, ahead),
                        }
                    }
                })*
                SliceLayout::Contiguous { bytes } if bytes <= SMALL_ROW => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_small_rows::<ZERO>(src, offsets, count, dst, bytes, pf, ahead) }
                }
                SliceLayout::Contiguous { bytes } => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_var::<false, ZERO, 0>(src, offsets, count, dst, bytes, ahead) }
                }
                SliceLayout::Strided { run, ref outer } => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_strided::<ZERO>(src, offsets, count, dst, run, outer, plan.slice_bytes) }
                }
            }
        };
    }
    fixed!(1 2 3 4 6 8 12 16 24 32 48 64 128);
}

/// Copies `dst.len()` bytes from `src`: the common element sizes as one
/// move each, not a call to memcpy.
///
/// # Safety
/// `src` must be readable for `dst.len()` bytes that do not overlap `dst`.
#[inline(always)]
pub(crate) unsafe fn copy_contiguous(src: *const u8, dst: &mut [u8]) {
    let d = dst.as_mut_ptr();
    // SAFETY: forwarded from the caller, for exactly `dst.len()` bytes.
    unsafe {
        match dst.len() {
            4 => two_moves::<u32>(src, d, 4),
            8 => two_moves::<u64>(src, d, 8),
            2 => two_moves::<u16>(src, d, 2),
            n => std::ptr::copy_nonoverlapping(src, d, n),
        }
    }
}

// Copies that bypass the cache on their way out.
//
// A large output written with ordinary stores is first read into the cache
// (write-allocate), so every output byte crosses the memory bus twice.
// Non-temporal stores write whole lines straight to memory: on a
// bandwidth-bound gather that is a third less traffic. They are only worth
// it when the output is far larger than the caches, and they are weakly
// ordered: a thread must `fence` before others may read what it wrote.

/// Copies `len` bytes from `src` to `dst` with non-temporal stores where
/// `dst` is 16-byte aligned, ordinary copies for the unaligned head and the
/// tail.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`.
#[inline(always)]
pub(crate) unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len >= STREAM_LINES_MIN && crate::machine::wide_vectors() {
        // SAFETY: forwarded from the caller; the CPU has AVX-512F.
        return unsafe { stream_whole_lines_of_run(src, dst, len) };
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(16).min(len);
        // SAFETY: the caller's contract covers all `len` bytes; each step
        // below stays within them.
        unsafe {
            if head != 0 {
                copy_small(src, dst, head);
            }
            let (mut s, mut d, mut n) = (src.add(head), dst.add(head), len - head);
            while n >= 64 {
                // `d` is 16-aligned here, as `_mm_stream_si128` requires.
                let v0 = _mm_loadu_si128(s.cast::<__m128i>());
                let v1 = _mm_loadu_si128(s.add(16).cast::<__m128i>());
                let v2 = _mm_loadu_si128(s.add(32).cast::<__m128i>());
                let v3 = _mm_loadu_si128(s.add(48).cast::<__m128i>());
                _mm_stream_si128(d.cast::<__m128i>(), v0);
                _mm_stream_si128(d.add(16).cast::<__m128i>(), v1);
                _mm_stream_si128(d.add(32).cast::<__m128i>(), v2);
                _mm_stream_si128(d.add(48).cast::<__m128i>(), v3);
                s = s.add(64);
                d = d.add(64);
                n -= 64;
            }
            while n >= 16 {
                _mm_stream_si128(d.cast::<__m128i>(), _mm_loadu_si128(s.cast::<__m128i>()));
                s = s.add(16);
                d = d.add(16);
                n -= 16;
            }
            if n != 0 {
                copy_small(s, d, n);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from the caller.
    unsafe {
        ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// Runs from this length on are streamed a whole line a store
/// ([`stream_whole_lines_of_run`]) where the CPU has AVX-512: at most one
/// line in sixteen of such a run goes through the cache (its two ends).
/// Shorter rows of whole lines have loops of their own
/// (`stream_line_stores`). Intel Xeon model 207 VM, two threads:
/// `slices_128k` (128 KiB rows) 0.80x the time, its `out=` 0.64x;
/// `tokens_b1` (1 KiB rows) 0.90x (docs/performance.md).
const STREAM_LINES_MIN: usize = 1024;

/// [`stream_copy`] of a long run, a whole line a store: the part up to
/// `dst`'s next line and the part after its last whole line are copied
/// through the cache, every line between by one 64-byte non-temporal store,
/// which fills a line's write-combining buffer by itself (as
/// `stream_line_stores` does for rows of a line to 512 bytes). By 16-byte
/// stores from `dst` 16 bytes past a line (NumPy's `out=`), four stores
/// wrote parts of two lines.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`; only on a CPU with
/// AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[link_section = "ndgather_dispatched"]
unsafe fn stream_whole_lines_of_run(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{_mm512_loadu_si512, _mm512_stream_si512};
    let head = to_next_line(dst).min(len);
    // SAFETY: every move below is inside the `len` bytes of both (caller):
    // the head, then whole lines while `at + LINE <= len`, then the rest
    // (below a line); `copy_small` takes up to a line; `dst + at` starts a
    // line in the loop, as the 64-byte store needs; AVX-512F (caller).
    unsafe {
        copy_small(src, dst, head);
        let mut at = head;
        while at + LINE <= len {
            _mm512_stream_si512(dst.add(at).cast(), _mm512_loadu_si512(src.add(at).cast()));
            at += LINE;
        }
        copy_small(src.add(at), dst.add(at), len - at);
    }
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
