//! The limits a gather is measured against (benches/floor.py loads this with ctypes).
//!
//! * [`floor_read`]: only the reads of a gather. Given the byte offset of every block a gather
//!   reads (a row, a slice, one element), it loads one byte of every cache line each block
//!   overlaps and adds them up, on `threads` threads, with software prefetch `distance` blocks
//!   ahead and `unroll` blocks per loop turn. No index is checked or resolved and nothing is
//!   written, so no gather of the same blocks can be faster: what is left is what the memory
//!   system charges for those cache lines at random addresses.
//! * [`floor_write`]: only the writes: `memset` of the output's bytes into a warm buffer on
//!   `threads` threads.
//! * [`floor_gather`]: the gather floor, the limit the benchmarks' tables use: the reads and
//!   the writes together, an unchecked gather of the same blocks by their precomputed offsets
//!   into a warm output, in code of its own (straight-line copies for the common widths,
//!   prefetch, plain or streaming stores, two ways of splitting threads). A gather cannot do
//!   less; the larger of the two floors above is no limit, as reads and writes share the
//!   caches and the memory bus. [`floor_offsets_fit`] checks the offsets once beforehand.
//!   With `per_call`, each segment (a service's batch) is gathered as one call gathers it:
//!   the prefetch starts with the segment and stops at its end, and the threads meet after
//!   each (the call floor of benches/service.py).
//!
//! All repeat their work `reps` times inside one call, so the time per repetition carries no
//! cost of crossing from Python (which would otherwise decide the small cases).

use std::hint::black_box;
use std::ptr::read_volatile;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

/// Cache line size the blocks are touched at (x86-64 and most ARM cores).
const LINE: usize = 64;
/// At most this many lines of a block are prefetched; the hardware prefetcher streams the rest
/// of a longer block once its first lines are read in order.
const PREFETCH_LINES: usize = 16;

/// Loads the first byte of every cache line that `[p, p + len)` overlaps.
///
/// # Safety
/// `[p, p + len)` must lie in one live allocation.
#[inline(always)]
unsafe fn touch(p: *const u8, len: usize) -> u64 {
    let start = p as usize;
    let end = start + len;
    let mut acc = 0u64;
    let mut a = start;
    while a < end {
        // SAFETY: start <= a < end, inside the block the caller vouches for. Volatile, so
        // that the compiler neither drops nor merges the load.
        acc = acc.wrapping_add(u64::from(unsafe { read_volatile(p.add(a - start)) }));
        a = (a | (LINE - 1)) + 1;
    }
    acc
}

/// Hints the lines `[p, p + len)` overlaps into the cache, at most [`PREFETCH_LINES`] of them
/// (`H`: `_MM_HINT_T0`, `T1`, `T2` or `NTA`, which caches and miss buffers the line goes
/// through); no architectural effect. Every line the block touches, the last one of a block
/// that does not start on a line included (a 60-byte block almost always spans two): a floor
/// that left it to a demand miss was beaten by the gathers it bounds.
#[inline(always)]
fn prefetch<const H: i32>(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_prefetch;
        if len == 0 {
            return;
        }
        let first = p as usize / LINE;
        let last = (p as usize + len - 1) / LINE;
        let lines = (last - first + 1).min(PREFETCH_LINES);
        let start = p.wrapping_sub(p as usize % LINE);
        for l in 0..lines {
            // SAFETY: a prefetch never faults, whatever the address (it is only a hint);
            // wrapping_add keeps the pointer arithmetic itself defined.
            unsafe { _mm_prefetch::<H>(start.wrapping_add(l * LINE).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// [`touch`] for a block of `W` bytes known when the loop compiles: a load at every 64th byte,
/// and at the last one when `W` neither divides nor is a multiple of a line (a 60-byte row
/// almost always ends on a second line; a line loaded twice is an L1 hit the second time),
/// with no loop or branch left after compiling. Blocks of the other widths are taken to sit on
/// whole lines, as they do in a line-aligned array: were they not, the floor would read fewer
/// lines than a gather, and still be a floor. A gather's
/// copy of a fixed width is straight-line code too: a floor whose per-block loop branched on the
/// block's alignment ran 1.3-1.5x the time of ndgather's copy of the same 128-byte rows.
///
/// # Safety
/// `[p, p + W)` must lie in one live allocation; `W > 0`.
#[inline(always)]
unsafe fn touch_fixed<const W: usize>(p: *const u8) -> u64 {
    let mut acc = 0u64;
    let mut at = 0;
    while at < W {
        // SAFETY: at < W, inside the block the caller vouches for; volatile, as in `touch`.
        acc = acc.wrapping_add(u64::from(unsafe { read_volatile(p.add(at)) }));
        at += LINE;
    }
    if straddles(W) {
        // SAFETY: W - 1 < W, inside the block.
        acc = acc.wrapping_add(u64::from(unsafe { read_volatile(p.add(W - 1)) }));
    }
    acc
}

/// Whether a block of `w` bytes may end on a line [`touch_fixed`] does not load at a multiple
/// of 64 bytes from its start: when `w` neither divides a line nor is a multiple of one.
const fn straddles(w: usize) -> bool {
    !w.is_multiple_of(LINE) && !LINE.is_multiple_of(w)
}

/// [`prefetch`] for a block of `W` bytes known when the loop compiles: every 64th byte up to
/// [`PREFETCH_LINES`] lines, and the last byte where [`straddles`] says so, or where `tail`
/// does: a block that does not start on a line ends on a line those steps miss.
#[inline(always)]
fn prefetch_fixed<const W: usize, const H: i32>(p: *const u8, tail: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_prefetch;
        let upto = W.min(PREFETCH_LINES * LINE);
        let mut at = 0;
        while at < upto {
            // SAFETY: a prefetch never faults, whatever the address (it is only a hint).
            unsafe { _mm_prefetch::<H>(p.wrapping_add(at).cast()) };
            at += LINE;
        }
        if (straddles(W) || tail) && W <= upto {
            // SAFETY: as above.
            unsafe { _mm_prefetch::<H>(p.wrapping_add(W - 1).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, tail);
}

/// How far past the offset of the block a loop turn prefetches the offsets array itself
/// ([`offsets_ahead`]), in offsets: 512 bytes, eight lines.
const OFFSETS_AHEAD: usize = 64;

/// Asks L1 for the offsets [`OFFSETS_AHEAD`] places past `ahead` (the offsets of the blocks
/// the loop prefetches), once a loop turn. The offsets are read in order, but while every
/// thread keeps its miss buffers full of random blocks the hardware's streamer left them to
/// demand misses, one stall every eight blocks: 256-byte rows on two threads (AMD kind) took
/// 15.9 ms without this against 12.2-12.5 ms with it, where ndgather, which prefetches its
/// indices ahead, took 13-14 ms. A hint only: past the array's end it reads nothing.
#[inline(always)]
fn offsets_ahead(ahead: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; wrapping_add keeps the pointer
    // arithmetic itself defined.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(ahead.as_ptr().wrapping_add(OFFSETS_AHEAD).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ahead;
}

/// Blocks `first .. first + count` of the cyclic sequence `offsets[0], offsets[1], ...,
/// offsets[n - 1], offsets[0], ...`, `U` blocks per loop turn, prefetching the block
/// `distance` places ahead. `offsets` holds `n` offsets and then its first ones again (at
/// least `distance` of them), so the block ahead needs no wrap-around test in the loop.
///
/// # Safety
/// Every `data + offsets[i] .. + block` lies in one live allocation; `n > 0`;
/// `n + distance <= offsets.len()`; `W` is 0 or `block`.
unsafe fn read_range<const U: usize, const H: i32, const W: usize>(
    data: *const u8,
    offsets: &[u64],
    n: usize,
    block: usize,
    first: usize,
    count: usize,
    distance: usize,
) -> u64 {
    let at = |off: u64| data.wrapping_add(off as usize);
    let mut acc = 0u64;
    let mut k = first % n;
    let mut left = count;
    while left > 0 {
        // A run of blocks that does not wrap around.
        let run = (n - k).min(left);
        let now = &offsets[k..k + run];
        let ahead = &offsets[k + distance..k + distance + run];
        let mut now_chunks = now.chunks_exact(U);
        let mut ahead_chunks = ahead.chunks_exact(U);
        for (c, a) in (&mut now_chunks).zip(&mut ahead_chunks) {
            offsets_ahead(a);
            for u in 0..U {
                if W == 0 {
                    if distance > 0 {
                        prefetch::<H>(at(a[u]), block);
                    }
                    // SAFETY: every offset's block is inside data (the caller's contract).
                    acc = acc.wrapping_add(unsafe { touch(at(c[u]), block) });
                } else {
                    if distance > 0 {
                        prefetch_fixed::<W, H>(at(a[u]), false);
                    }
                    // SAFETY: as above; W == block (read_with picks W so).
                    acc = acc.wrapping_add(unsafe { touch_fixed::<W>(at(c[u])) });
                }
            }
        }
        for &off in now_chunks.remainder() {
            // SAFETY: as above.
            acc = acc.wrapping_add(unsafe { touch(at(off), block) });
        }
        left -= run;
        k = 0;
    }
    acc
}

/// Blocks handed to a reading thread at a time by [`split`]: enough that taking them costs
/// nothing next to reading them, few enough that a thread the scheduler holds back delays the
/// end by little.
const CHUNK: usize = 1024;

/// Runs `work(thread, first, count)` over `0 .. total` on `threads` threads (the calling one,
/// number 0, and `threads - 1` spawned, numbered from 1), each taking the next `chunk` items
/// until none are left, so that a thread that runs late (a loaded machine) leaves its share to
/// the others; returns the sum of the results. No two threads ever get the same item, and a
/// thread's number is its own: the gather floor writes into a region of the output only its
/// thread writes.
fn split(
    total: usize,
    threads: usize,
    chunk: usize,
    work: impl Fn(usize, usize, usize) -> u64 + Sync,
) -> u64 {
    let chunk = chunk.max(1);
    let threads = used_threads(total, threads, chunk);
    let next = AtomicUsize::new(0);
    let drain = |thread: usize| {
        let mut acc = 0u64;
        loop {
            let first = next.fetch_add(chunk, Ordering::Relaxed);
            if first >= total {
                return acc;
            }
            acc = acc.wrapping_add(work(thread, first, chunk.min(total - first)));
        }
    };
    thread::scope(|s| {
        let handles: Vec<_> = (1..threads)
            .map(|t| {
                let drain = &drain;
                s.spawn(move || drain(t))
            })
            .collect();
        let mine = drain(0);
        handles
            .into_iter()
            .fold(mine, |acc, h| acc.wrapping_add(h.join().unwrap_or(0)))
    })
}

/// The threads [`split`] starts for `total` items taken `chunk` at a time: no more than there
/// are chunks, at least 1.
fn used_threads(total: usize, threads: usize, chunk: usize) -> usize {
    threads.clamp(1, total.div_ceil(chunk.max(1)).max(1))
}

/// [`read_range`] with the unrolling and prefetch hint given at run time.
///
/// # Safety
/// As [`read_range`].
#[allow(clippy::too_many_arguments)]
unsafe fn read_with(
    unroll: usize,
    hint: usize,
    data: *const u8,
    offsets: &[u64],
    n: usize,
    block: usize,
    first: usize,
    len: usize,
    distance: usize,
) -> u64 {
    // The values of x86-64's _MM_HINT_*, spelled out so that other targets build too.
    const T0: i32 = 3;
    const T1: i32 = 2;
    const T2: i32 = 1;
    const NTA: i32 = 0;
    macro_rules! hinted {
        ($u:literal, $w:literal) => {
            // SAFETY: the caller's contract, passed on; $w is 0 or `block`.
            unsafe {
                match hint {
                    1 => read_range::<$u, T1, $w>(data, offsets, n, block, first, len, distance),
                    2 => read_range::<$u, T2, $w>(data, offsets, n, block, first, len, distance),
                    3 => read_range::<$u, NTA, $w>(data, offsets, n, block, first, len, distance),
                    _ => read_range::<$u, T0, $w>(data, offsets, n, block, first, len, distance),
                }
            }
        };
    }
    // The block widths of the benchmarks' cases (elements, 60-byte slices, rows of 64 to 512
    // bytes) as constants; any other through the loops of `touch` and `prefetch`.
    macro_rules! go {
        ($u:literal) => {
            match block {
                1 => hinted!($u, 1),
                2 => hinted!($u, 2),
                4 => hinted!($u, 4),
                8 => hinted!($u, 8),
                60 => hinted!($u, 60),
                64 => hinted!($u, 64),
                128 => hinted!($u, 128),
                140 => hinted!($u, 140),
                256 => hinted!($u, 256),
                512 => hinted!($u, 512),
                1024 => hinted!($u, 1024),
                _ => hinted!($u, 0),
            }
        };
    }
    match unroll {
        2 => go!(2),
        4 => go!(4),
        8 => go!(8),
        _ => go!(1),
    }
}

/// Reads `count` blocks of `block` bytes at `data + offsets[(start + i) % n]`, then the same
/// again, `reps` times in all, on `threads` threads; returns the sum of the bytes loaded (one
/// per cache line), so that nothing is optimised away. `offsets` has `padded >= n` entries,
/// the `n` offsets then the first ones again; `distance` is capped at `padded - n`. `unroll`
/// is 1, 2, 4 or 8 (others: 1); `hint` 0 to 3: prefetch to L1 (T0), L2 (T1), L3 (T2) or
/// non-temporal (NTA).
///
/// # Safety
/// `data` points to readable bytes and `offsets` to `padded` offsets, each with `data +
/// offset .. + block` inside them (benches/floor.py checks this before calling).
#[no_mangle]
pub unsafe extern "C" fn floor_read(
    data: *const u8,
    offsets: *const u64,
    n: usize,
    padded: usize,
    block: usize,
    start: usize,
    count: usize,
    reps: usize,
    threads: usize,
    distance: usize,
    unroll: usize,
    hint: usize,
) -> u64 {
    if n == 0 || padded < n || data.is_null() || offsets.is_null() {
        return 0;
    }
    // SAFETY: the caller passes `padded` live offsets.
    let offsets = unsafe { std::slice::from_raw_parts(offsets, padded) };
    let distance = distance.min(padded - n);
    let data = data as usize; // shared by the threads; read only
    let total = count.saturating_mul(reps.max(1));
    split(total, threads, CHUNK, |_, first, len| {
        let data = data as *const u8;
        let first = start + first;
        // SAFETY: the caller's contract (every block inside data).
        unsafe { read_with(unroll, hint, data, offsets, n, block, first, len, distance) }
    })
}

/// Fills `[p, p + len)` with `value` by non-temporal (streaming) stores where 16-byte aligned,
/// plain stores at the ragged ends: the writes bypass the caches and need no read of the line
/// first, the cheapest way to write an output that is not read back soon.
///
/// # Safety
/// `[p, p + len)` is writable and used by nothing else during the call.
unsafe fn stream_fill(p: *mut u8, len: usize, value: u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_set1_epi8, _mm_stream_si128};
        let head = p.align_offset(16).min(len);
        let body = (len - head) / 16;
        // SAFETY: the head, the body of whole 16-byte aligned words and the tail cover
        // [p, p + len) exactly; _mm_stream_si128 needs a 16-byte aligned address, which
        // `p + head` is. SSE2 is part of x86-64.
        unsafe {
            std::ptr::write_bytes(p, value, head);
            let v = _mm_set1_epi8(value as i8);
            let words = p.add(head).cast::<__m128i>();
            for w in 0..body {
                _mm_stream_si128(words.add(w), v);
            }
            let done = head + body * 16;
            std::ptr::write_bytes(p.add(done), value, len - done);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::write_bytes(p, value, len)
    };
}

/// Writes `len` bytes at `dst`, `reps` times, on `threads` threads taking 64 KiB pieces in
/// turn: with plain stores (`memset`) or, with `streaming`, non-temporal ones.
///
/// # Safety
/// `dst` points to `len` writable bytes that nothing else uses during the call.
#[no_mangle]
pub unsafe extern "C" fn floor_write(
    dst: *mut u8,
    len: usize,
    reps: usize,
    threads: usize,
    streaming: bool,
) {
    if dst.is_null() || len == 0 {
        return;
    }
    let dst = dst as usize;
    const PIECE: usize = 64 << 10;
    let pieces = len.div_ceil(PIECE);
    let total = pieces.saturating_mul(reps.max(1));
    split(total, threads, 1, |_, first, count| {
        for item in first..first + count {
            let (r, piece) = (item / pieces, item % pieces);
            let a = piece * PIECE;
            let n = PIECE.min(len - a);
            let p = (dst + a) as *mut u8;
            // SAFETY: [a, a + n) is inside the caller's `len` writable bytes, and no other
            // thread gets the same piece of the same repetition.
            unsafe {
                if streaming {
                    stream_fill(p, n, r as u8);
                } else {
                    std::ptr::write_bytes(p, r as u8, n);
                }
            }
            black_box(p);
        }
        #[cfg(target_arch = "x86_64")]
        if streaming {
            // SAFETY: a store fence has no preconditions; it completes this thread's
            // streaming stores, as a gather that streams its output must.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
        0
    });
}

// --------------------------------------------------------------------------- the gather floor

/// Copies the `W` bytes at `src` to `dst` in straight-line code (no loop, no call: `W` is
/// known when it compiles), in pieces of at most 64 bytes, the way a gather's copy of a fixed
/// width is compiled. `NT`: the pieces go out by streaming (non-temporal) stores, bypassing
/// the caches, where `W` allows (4, 8 or a multiple of 16 bytes); other widths by
/// [`stream_copy`].
///
/// # Safety
/// `[src, src + W)` is readable, `[dst, dst + W)` writable and apart from it; with `NT`, `dst`
/// is aligned to `W`'s element (4 or 8 bytes) or, for a multiple of 16 bytes, to 16 (the
/// 32-byte stores are taken only where `dst` is aligned to 32, and whole lines by
/// [`lines_from`], whatever the place of `dst` in its line).
#[inline(always)]
unsafe fn copy_fixed<const W: usize, const NT: bool>(src: *const u8, dst: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    if NT {
        use std::arch::x86_64::*;
        // SAFETY: (all of this block) every load and store is inside the `W` bytes the caller
        // vouches for, and each streaming store of 16 (32) bytes is at `dst` plus a multiple
        // of 16 (32, 64), which the caller's alignment makes aligned as the instruction
        // needs. SSE2 is part of x86-64; AVX and AVX-512F only where this is compiled for
        // them.
        unsafe {
            if W == 4 {
                _mm_stream_si32(dst.cast(), src.cast::<i32>().read_unaligned());
            } else if W == 8 {
                _mm_stream_si64(dst.cast(), src.cast::<i64>().read_unaligned());
            } else if cfg!(target_feature = "avx512f") && W.is_multiple_of(64) {
                // Every block of a run starts as far past a line as the output does (`W` is
                // whole lines): one arm, predicted, a constant split inside each.
                #[cfg(target_feature = "avx512f")]
                match (dst as usize) % LINE {
                    0 => lines_from::<W, 0>(src, dst),
                    48 => lines_from::<W, 16>(src, dst),
                    32 => lines_from::<W, 32>(src, dst),
                    _ => lines_from::<W, 48>(src, dst),
                }
            } else if cfg!(target_feature = "avx")
                && W.is_multiple_of(32)
                && (dst as usize).is_multiple_of(32)
            {
                #[cfg(target_feature = "avx")]
                {
                    let mut at = 0;
                    while at < W {
                        let v = _mm256_loadu_si256(src.add(at).cast());
                        _mm256_stream_si256(dst.add(at).cast(), v);
                        at += 32;
                    }
                }
            } else if W.is_multiple_of(16) {
                let mut at = 0;
                while at < W {
                    let v = _mm_loadu_si128(src.add(at).cast());
                    _mm_stream_si128(dst.add(at).cast(), v);
                    at += 16;
                }
            } else {
                stream_copy(src, dst, W);
            }
        }
        return;
    }
    // SAFETY: the caller's contract (the `W` bytes of both blocks), passed on.
    unsafe { copy_pieces::<W>(src, dst) };
}

/// [`copy_fixed`]'s streamed copy of `W` bytes (a multiple of 64) to a `dst` `HEAD` bytes
/// before its next line (0, 16, 32 or 48): the bytes up to that line and those after the last
/// whole line by 16-byte streaming stores, each whole line between by one 64-byte store. An
/// output placed in its lines as `data`'s rows are (`floor.py`'s `placed`) then loads and
/// stores every line on the same steps.
///
/// # Safety
/// As [`copy_fixed`] with `NT`, `dst` 16-byte aligned and `HEAD` its distance to a line.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
#[inline(always)]
unsafe fn lines_from<const W: usize, const HEAD: usize>(src: *const u8, dst: *mut u8) {
    use std::arch::x86_64::*;
    debug_assert_eq!((dst as usize + HEAD) % LINE, 0);
    // SAFETY: every move is inside the `W` bytes of both blocks (`HEAD` and `W` multiples of
    // 16, `HEAD < 64 <= W`); each 16-byte store is at `dst` plus a multiple of 16 (aligned:
    // `dst` is), each 64-byte one at a line (`dst + HEAD` starts one); AVX-512F is compiled in.
    unsafe {
        let mut at = 0;
        while at < HEAD {
            _mm_stream_si128(dst.add(at).cast(), _mm_loadu_si128(src.add(at).cast()));
            at += 16;
        }
        while at + LINE <= W {
            _mm512_stream_si512(dst.add(at).cast(), _mm512_loadu_si512(src.add(at).cast()));
            at += LINE;
        }
        while at < W {
            _mm_stream_si128(dst.add(at).cast(), _mm_loadu_si128(src.add(at).cast()));
            at += 16;
        }
    }
}

/// [`copy_fixed`] of a multiple of 16 bytes in 16-byte pieces, by plain or (`NT`) streaming
/// stores (see [`copy_run`]): straight-line code, as the loop has a constant trip count. Last
/// piece first, or with `forward` first piece first.
///
/// # Safety
/// As for [`copy_fixed`]; `W` a multiple of 16; with `NT`, `dst` 16-byte aligned.
#[inline(always)]
unsafe fn copy_narrow<const W: usize, const NT: bool>(src: *const u8, dst: *mut u8, forward: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_storeu_si128, _mm_stream_si128};
        let piece = |at: usize| {
            // SAFETY: bytes at .. at + 16 <= W of both blocks (W a multiple of 16, `at` one
            // of the multiples of 16 below W taken next); a streaming store at `dst` plus a
            // multiple of 16, 16-byte aligned (caller).
            unsafe {
                let v = _mm_loadu_si128(src.add(at).cast());
                if NT {
                    _mm_stream_si128(dst.add(at).cast(), v);
                } else {
                    _mm_storeu_si128(dst.add(at).cast(), v);
                }
            }
        };
        if forward {
            // The order a copy that prefetched the block first takes (ndgather's streamed
            // rows; `copy_run`'s `early`).
            let mut at = 0;
            while at + 64 <= W {
                // SAFETY: as for `piece`: the 64 bytes at `at` of both blocks.
                unsafe {
                    let v0 = _mm_loadu_si128(src.add(at).cast());
                    let v1 = _mm_loadu_si128(src.add(at + 16).cast());
                    let v2 = _mm_loadu_si128(src.add(at + 32).cast());
                    let v3 = _mm_loadu_si128(src.add(at + 48).cast());
                    if NT {
                        _mm_stream_si128(dst.add(at).cast(), v0);
                        _mm_stream_si128(dst.add(at + 16).cast(), v1);
                        _mm_stream_si128(dst.add(at + 32).cast(), v2);
                        _mm_stream_si128(dst.add(at + 48).cast(), v3);
                    } else {
                        _mm_storeu_si128(dst.add(at).cast(), v0);
                        _mm_storeu_si128(dst.add(at + 16).cast(), v1);
                        _mm_storeu_si128(dst.add(at + 32).cast(), v2);
                        _mm_storeu_si128(dst.add(at + 48).cast(), v3);
                    }
                }
                at += 64;
            }
            while at < W {
                piece(at);
                at += 16;
            }
        } else {
            // Last piece first: its line is the one the prefetch asked for last (0.93x the
            // time of first piece first, 128-byte rows 16 bytes past a line, AMD kind).
            let mut at = W;
            while at > 0 {
                at -= 16;
                piece(at);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        let _ = forward;
        copy_fixed::<W, NT>(src, dst)
    };
}

/// The plain copy of [`copy_fixed`]: 32-byte unaligned vector moves (16-byte without AVX)
/// spelled out for up to 1 KiB, each under a test of `W` that compiles away, then what is
/// left of `W` by `copy_nonoverlapping` (under a piece: a few moves). Not a loop: LLVM turns a
/// loop of moves back into a call of `memcpy`, and a `read_volatile` of a byte array into
/// byte loads.
///
/// # Safety
/// As `ptr::copy_nonoverlapping(src, dst, W)`.
#[inline(always)]
unsafe fn copy_pieces<const W: usize>(src: *const u8, dst: *mut u8) {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "avx")))]
    use std::arch::x86_64::{__m128i as Piece, _mm_loadu_si128 as load, _mm_storeu_si128 as store};
    #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
    use std::arch::x86_64::{
        __m256i as Piece, _mm256_loadu_si256 as load, _mm256_storeu_si256 as store,
    };
    #[cfg(target_arch = "x86_64")]
    {
        const P: usize = std::mem::size_of::<Piece>();
        macro_rules! pieces {
            ($($k:literal)*) => {$(
                if ($k + 1) * P <= W {
                    // SAFETY: bytes k * P .. (k + 1) * P <= W of both blocks; unaligned
                    // loads and stores (SSE2 is part of x86-64, AVX where compiled for it).
                    unsafe { store(dst.add($k * P).cast(), load(src.add($k * P).cast())) };
                }
            )*};
        }
        pieces!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        let done = (W / P).min(32) * P;
        if done < W {
            // SAFETY: the bytes done .. W of both blocks.
            unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), W - done) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, W)
    };
}

/// Blocks longer than this are copied with software prefetch [`LOOKAHEAD`] bytes ahead inside
/// the block: the hardware's streamer stops at every 4 KiB page, and a gather of 128 KiB
/// slices is one long copy after another.
const LONG: usize = 4096;
/// How far ahead inside a long block its source is prefetched.
const LOOKAHEAD: usize = 1024;

/// Copies `len` bytes from `src` to `dst` by streaming stores of whole 64-byte lines of `dst`
/// (one 64-byte store with AVX-512F, two of 32 bytes with AVX, four of 16 bytes without), plain ones at the ragged ends (as
/// [`stream_fill`] writes); the source of a long block prefetched ahead.
///
/// # Safety
/// As `ptr::copy_nonoverlapping(src, dst, len)`.
#[inline(always)]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let head = dst.align_offset(LINE).min(len);
        let lines = (len - head) / LINE;
        let ahead = if len > LONG { LOOKAHEAD } else { 0 };
        // SAFETY: the head, the body of whole lines (64-byte aligned at `dst + head`, so each
        // 16-, 32- or 64-byte streaming store is aligned as it needs) and the tail cover
        // [0, len) exactly, inside both blocks; a prefetch never faults, whatever the
        // address. SSE2 is part of x86-64, AVX and AVX-512F only where this is compiled for
        // them.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (s, d) = (src.add(head), dst.add(head));
            for l in 0..lines {
                let (s, d) = (s.add(l * LINE), d.add(l * LINE));
                if ahead > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(s.wrapping_add(ahead).cast());
                }
                #[cfg(target_feature = "avx512f")]
                _mm512_stream_si512(d.cast(), _mm512_loadu_si512(s.cast()));
                #[cfg(all(target_feature = "avx", not(target_feature = "avx512f")))]
                {
                    _mm256_stream_si256(d.cast(), _mm256_loadu_si256(s.cast()));
                    _mm256_stream_si256(d.add(32).cast(), _mm256_loadu_si256(s.add(32).cast()));
                }
                #[cfg(not(target_feature = "avx"))]
                for w in 0..4 {
                    let v = _mm_loadu_si128(s.add(16 * w).cast());
                    _mm_stream_si128(d.add(16 * w).cast(), v);
                }
            }
            let done = head + lines * LINE;
            std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

/// A block of any width: `memcpy`, or [`stream_copy`] with `NT`.
///
/// # Safety
/// As `ptr::copy_nonoverlapping(src, dst, len)`.
#[inline(always)]
unsafe fn copy_any<const NT: bool>(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        if NT {
            stream_copy(src, dst, len);
        } else {
            std::ptr::copy_nonoverlapping(src, dst, len);
        }
    }
}

/// Copies the blocks at `data + now[i]` to `dst`, `dst + block`, ... in order, `U` a loop
/// turn, prefetching the block at `data + ahead[i]` (when `prefetch`) with hint `H`. With
/// `narrow`, for blocks that do not start on a line (rows of a NumPy array, whose large
/// buffers start 16 bytes past one): fixed widths that are a multiple of 16 bytes are moved
/// in 16-byte pieces, none of which then straddles two lines (a 32- or 64-byte piece at 16
/// bytes past a line does: 128-byte rows took 25 ns a row so on the AMD kind, against 6.5
/// ns from a line-aligned table and 10 ns for ndgather's 16-byte moves), the prefetch asks
/// for each block's last line too ([`prefetch_fixed`]; so it does without `narrow` for blocks
/// that may not start on a line), and it comes after the block's copy, not before (with hint
/// T2: 9-10 ns a row, against 12-16 ns before it); with `early` before it, the pieces then
/// first to last, as ndgather streams such rows (AMD kind, two threads, its own timed calls:
/// `tokens_b1`'s 1 KiB rows 1.42 against 1.63 ms after, `gather_batch`'s 64-byte rows
/// 1.42-1.43 against 1.56-1.61 ms at best). The tuning tries all three ways.
///
/// # Safety
/// Every `data + now[i] .. + block` is readable; `[dst, dst + now.len() * block)` writable
/// and apart from them (and aligned as [`copy_fixed`] asks with `NT`); `ahead` is at least as
/// long as `now`; `W` is 0 or `block`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn copy_run<const U: usize, const H: i32, const W: usize, const NT: bool>(
    data: *const u8,
    now: &[u64],
    ahead: &[u64],
    mut dst: *mut u8,
    block: usize,
    prefetch_ahead: bool,
    narrow: bool,
    early: bool,
) {
    let at = |off: u64| data.wrapping_add(off as usize);
    // Blocks that may not start on a line (the offsets are multiples of `block`) have their
    // last line requested too, however they are copied: without it the whole-line copy of
    // 512-byte rows 16 bytes past a line missed a line a row, which ndgather requests.
    let off_line = !(data as usize).is_multiple_of(LINE) || !block.is_multiple_of(LINE);
    let mut now_chunks = now.chunks_exact(U);
    let mut ahead_chunks = ahead.chunks_exact(U);
    for (c, a) in (&mut now_chunks).zip(&mut ahead_chunks) {
        offsets_ahead(a);
        for u in 0..U {
            // SAFETY: (both arms) the block at c[u] is readable and the next `block` bytes of
            // the output writable (the caller's contract); W == block when W != 0.
            unsafe {
                if W == 0 {
                    if prefetch_ahead {
                        prefetch::<H>(at(a[u]), block);
                    }
                    copy_any::<NT>(at(c[u]), dst, block);
                    dst = dst.add(block);
                } else {
                    if narrow && W.is_multiple_of(16) {
                        if early && prefetch_ahead {
                            prefetch_fixed::<W, H>(at(a[u]), true);
                        }
                        copy_narrow::<W, NT>(at(c[u]), dst, early);
                        if !early && prefetch_ahead {
                            prefetch_fixed::<W, H>(at(a[u]), true);
                        }
                    } else {
                        if prefetch_ahead {
                            prefetch_fixed::<W, H>(at(a[u]), narrow || off_line);
                        }
                        copy_fixed::<W, NT>(at(c[u]), dst);
                    }
                    dst = dst.add(W);
                }
            }
        }
    }
    for &off in now_chunks.remainder() {
        // SAFETY: as above.
        unsafe {
            if W == 0 {
                copy_any::<NT>(at(off), dst, block);
            } else if narrow && W.is_multiple_of(16) {
                copy_narrow::<W, NT>(at(off), dst, early);
            } else {
                copy_fixed::<W, NT>(at(off), dst);
            }
            dst = dst.add(block);
        }
    }
}

/// Where a stretch of a gather floor's work is: `count` blocks from place `start` of the cycle
/// of `n` offsets, repeated; block `i` of the stretch goes to place `i % seg` of the output
/// (the output holds one segment: the whole gather, or one batch of a service).
#[derive(Clone, Copy)]
struct Stretch {
    n: usize,
    start: usize,
    count: usize,
    seg: usize,
    block: usize,
    distance: usize,
    /// Whether blocks are copied as rows that do not start on a line ([`copy_run`]).
    narrow: bool,
    /// With `narrow`: each block's prefetch comes before its copy, whose pieces go first to
    /// last ([`copy_run`]).
    early: bool,
    /// Each `first .. first + len` given to [`gather_range`] is one call's share of a batch:
    /// its first `distance` blocks are requested before its copy starts, and no block past
    /// its end is requested (a call does not know the next call's blocks).
    per_call: bool,
}

/// Items `first .. first + len` of a stretch's repetitions (item `r * count + i` is block `i`
/// of repetition `r`), copied into `region` (one segment of `seg` blocks): in runs that cross
/// neither the end of the cycle, nor of the stretch, nor of a segment, so that within a run
/// the offsets and the output are both consecutive and nothing is divided per block.
///
/// # Safety
/// Every `data + offsets[k] .. + block` (k < n) is readable; `offsets` holds `n + distance`
/// offsets at least (the first ones again after the `n`); `region` has `seg * block` writable
/// bytes no one else uses during the call, 16-byte aligned; `W` is 0 or `block`.
unsafe fn gather_range<const U: usize, const H: i32, const W: usize, const NT: bool>(
    data: *const u8,
    offsets: &[u64],
    region: *mut u8,
    s: Stretch,
    first: usize,
    len: usize,
) {
    let (mut item, end) = (first, first + len);
    let place = |item: usize| (s.start + item % s.count) % s.n;
    if s.per_call && s.distance > 0 {
        // The call's first blocks, requested before its first copy (as a gather does).
        for item in first..end.min(first + s.distance) {
            prefetch::<H>(data.wrapping_add(offsets[place(item)] as usize), s.block);
        }
    }
    while item < end {
        let i = item % s.count; // block of the stretch
        let k = (s.start + i) % s.n; // place in the cycle
        let j = i % s.seg; // place in the output
        let mut run = (end - item).min(s.count - i).min(s.n - k).min(s.seg - j);
        if s.per_call {
            let ahead_end = end.saturating_sub(s.distance); // the last block requested ahead
            if item >= ahead_end {
                // The call's last blocks: nothing of the call is left to request.
                // SAFETY: as below, with the prefetch off.
                unsafe {
                    copy_run::<U, H, W, NT>(
                        data,
                        &offsets[k..k + run],
                        &offsets[k..k + run],
                        region.add(j * s.block),
                        s.block,
                        false,
                        s.narrow,
                        s.early,
                    );
                }
                item += run;
                continue;
            }
            run = run.min(ahead_end - item);
        }
        // SAFETY: k + run <= n and k + distance + run <= n + distance <= offsets.len(), so
        // both slices are in bounds; j + run <= seg, so the run's output is inside the region.
        unsafe {
            copy_run::<U, H, W, NT>(
                data,
                &offsets[k..k + run],
                &offsets[k + s.distance..k + s.distance + run],
                region.add(j * s.block),
                s.block,
                s.distance > 0,
                s.narrow,
                s.early,
            );
        }
        item += run;
    }
}

/// [`gather_range`] with the unrolling, prefetch hint and streaming given at run time.
///
/// # Safety
/// As [`gather_range`] (with `W` = 0 or `block`, which this picks).
#[allow(clippy::too_many_arguments)]
unsafe fn gather_with(
    unroll: usize,
    hint: usize,
    streaming: bool,
    data: *const u8,
    offsets: &[u64],
    region: *mut u8,
    s: Stretch,
    first: usize,
    len: usize,
) {
    const T0: i32 = 3;
    const T1: i32 = 2;
    const T2: i32 = 1;
    const NTA: i32 = 0;
    macro_rules! go {
        ($u:literal, $h:ident, $w:literal) => {
            // SAFETY: the caller's contract, passed on; $w is 0 or `block`.
            unsafe {
                if streaming {
                    gather_range::<$u, $h, $w, true>(data, offsets, region, s, first, len)
                } else {
                    gather_range::<$u, $h, $w, false>(data, offsets, region, s, first, len)
                }
            }
        };
    }
    macro_rules! hinted {
        ($u:literal, $w:literal) => {
            match hint {
                1 => go!($u, T1, $w),
                2 => go!($u, T2, $w),
                3 => go!($u, NTA, $w),
                _ => go!($u, T0, $w),
            }
        };
    }
    // Straight-line copies for the common widths and the benchmarks' own (elements of 1 to 8
    // bytes, 60- and 140-byte slices, rows of 64 bytes to 1 KiB); `memcpy` for any other.
    macro_rules! width {
        ($u:literal) => {
            match s.block {
                1 => hinted!($u, 1),
                2 => hinted!($u, 2),
                4 => hinted!($u, 4),
                8 => hinted!($u, 8),
                16 => hinted!($u, 16),
                32 => hinted!($u, 32),
                60 => hinted!($u, 60),
                64 => hinted!($u, 64),
                128 => hinted!($u, 128),
                140 => hinted!($u, 140),
                256 => hinted!($u, 256),
                512 => hinted!($u, 512),
                1024 => hinted!($u, 1024),
                _ => hinted!($u, 0),
            }
        };
    }
    match unroll {
        2 => width!(2),
        4 => width!(4),
        8 => width!(8),
        _ => width!(1),
    }
}

/// Whether every block `data + offsets[i] .. + block` (`i < padded`) lies in the `data_len`
/// bytes at `data`: benches/floor.py asks once, before any [`floor_gather`] of them.
///
/// # Safety
/// `offsets` points to `padded` readable offsets.
#[no_mangle]
pub unsafe extern "C" fn floor_offsets_fit(
    offsets: *const u64,
    padded: usize,
    block: usize,
    data_len: usize,
) -> bool {
    if offsets.is_null() {
        return false;
    }
    // SAFETY: the caller passes `padded` live offsets.
    let offsets = unsafe { std::slice::from_raw_parts(offsets, padded) };
    offsets.iter().all(|&o| {
        usize::try_from(o)
            .ok()
            .and_then(|o| o.checked_add(block))
            .is_some_and(|end| end <= data_len)
    })
}

/// The gather floor: an unchecked gather of the blocks at `data + offsets[..]` (byte offsets,
/// precomputed) into a warm output, with nothing of ndgather in it. Blocks `start .. start +
/// count` of the cycle of `n` offsets, `reps` times, each copied to its place in the output:
/// block `i` of the stretch to block `i % seg` of a segment of `seg` blocks (one segment is
/// the case's whole output, or one batch of a service). On `threads` threads, split one of
/// two ways, so that no two threads ever write the same bytes:
///
/// * `shared` false: dynamic chunks of [`CHUNK`] blocks, taken as threads come free, each
///   thread `t` writing a segment of its own, `out + t * seg * block .. + seg * block` (the
///   output is `threads` segments: more memory, and more cache, than a gather's);
/// * `shared` true: one segment, each thread the same share of every segment (thread `t` the
///   blocks `t * seg / threads .. (t + 1) * seg / threads`), as a gather splits its output.
///
/// Prefetching the block `distance` places ahead with hint `hint` (0 to 3: T0, T1, T2, NTA),
/// `unroll` blocks a loop turn (1, 2, 4 or 8), by plain or (`streaming`) non-temporal stores;
/// with `narrow`, as rows that do not start on a line, and with `early` too, prefetching
/// each block before its copy (see [`copy_run`]).
/// With `per_call`, each segment's blocks are gathered as one call gathers its batch, as
/// `shared` (whatever is asked) with the threads waiting for each other at the end of every
/// segment: the first `distance` blocks of a thread's share requested before its copy, none
/// past the share's end (see [`Stretch::per_call`]).
/// Returns the blocks copied: 0 when the sizes given do not hold the work (nothing done).
///
/// # Safety
/// `data` points to readable bytes and `offsets` to `padded` offsets, each block `data +
/// offset .. + block` inside them ([`floor_offsets_fit`] said so); `out` to `out_len`
/// writable bytes that nothing else uses during the call and that do not overlap `data`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn floor_gather(
    data: *const u8,
    offsets: *const u64,
    n: usize,
    padded: usize,
    block: usize,
    out: *mut u8,
    out_len: usize,
    seg: usize,
    start: usize,
    count: usize,
    reps: usize,
    threads: usize,
    shared: bool,
    distance: usize,
    unroll: usize,
    hint: usize,
    streaming: bool,
    narrow: bool,
    early: bool,
    per_call: bool,
) -> u64 {
    // A call's share of a batch is a share of the one output, and the threads wait for each
    // other at the end of every batch, as a call's caller waits for its helpers.
    let shared = shared || per_call;
    let total = count.saturating_mul(reps.max(1));
    let used = if shared {
        threads.clamp(1, seg.max(1))
    } else {
        used_threads(total, threads, CHUNK)
    };
    // The sizes at the boundary: every segment written inside `out`, which is 16-byte aligned
    // for the streaming stores (a line-aligned one, or one placed in its lines as `data`'s
    // rows are: floor.py's `placed`); the offsets ahead (`distance`) inside the `padded` given.
    let segments = if shared { 1 } else { used };
    let region_len = seg.checked_mul(block);
    let fits = region_len
        .and_then(|r| r.checked_mul(segments))
        .is_some_and(|need| need <= out_len);
    if data.is_null()
        || offsets.is_null()
        || out.is_null()
        || n == 0
        || padded < n
        || block == 0
        || seg == 0
        || count == 0
        || !fits
        || !(out as usize).is_multiple_of(16)
    {
        return 0;
    }
    let region_len = seg * block;
    // SAFETY: the caller passes `padded` live offsets.
    let offsets = unsafe { std::slice::from_raw_parts(offsets, padded) };
    let s = Stretch {
        n,
        start: start % n,
        count,
        seg,
        block,
        distance: distance.min(padded - n),
        narrow,
        early,
        per_call,
    };
    // Shared by the threads.
    let (data, out) = (data as usize, out as usize);
    // Items `first .. first + len` into the segment at `region`.
    // SAFETY: (of each call) the blocks are inside data (the caller's contract); the segment
    // is inside `out` (checked above) and only this thread writes the places of it that these
    // items go to (each way of splitting says why); it starts 16-byte aligned (`out` is, and
    // so is every segment after the first when a streaming copy needs it: `block` is then a
    // multiple of 16, and so is `seg * block`, or of the 4 or 8 bytes its stores need).
    let gather = |region: usize, first: usize, len: usize| unsafe {
        gather_with(
            unroll,
            hint,
            streaming,
            data as *const u8,
            offsets,
            region as *mut u8,
            s,
            first,
            len,
        )
    };
    if !shared {
        // Thread t writes only segment t of `out`.
        return split(total, used, CHUNK, |t, first, len| {
            gather(out + t * region_len, first, len);
            len as u64
        });
    }
    // Thread t writes only the places t * seg / used .. (t + 1) * seg / used of the one
    // segment, in every segment of the stretch and every repetition.
    // Per call: the batches' shares done by every thread, so that none starts on the next
    // batch before all are done with this one (a spin barrier: the least a call's join costs).
    let arrived = AtomicUsize::new(0);
    let share = |t: usize| {
        let (lo, hi) = (t * seg / used, (t + 1) * seg / used);
        let mut done = 0u64;
        let mut batches = 0;
        for r in 0..reps.max(1) {
            for s0 in (0..count).step_by(seg) {
                let (a, b) = (s0 + lo, (s0 + hi).min(count));
                if a < b {
                    gather(out, r * count + a, b - a);
                    done += (b - a) as u64;
                }
                if per_call && used > 1 {
                    batches += 1;
                    arrived.fetch_add(1, Ordering::AcqRel);
                    while arrived.load(Ordering::Acquire) < batches * used {
                        std::hint::spin_loop();
                    }
                } else if per_call {
                    // A call returns once its copy is done: the next call's loads do not
                    // overlap this one's (a locked add above, a full fence here).
                    std::sync::atomic::fence(Ordering::SeqCst);
                }
            }
        }
        done
    };
    thread::scope(|sc| {
        let share = &share;
        let handles: Vec<_> = (1..used).map(|t| sc.spawn(move || share(t))).collect();
        let mine = share(0);
        handles
            .into_iter()
            .fold(mine, |acc, h| acc + h.join().unwrap_or(0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines `[o, o + w)` overlaps in an array starting on a line.
    fn lines(o: usize, w: usize) -> usize {
        (o + w - 1) / LINE - o / LINE + 1
    }

    /// Every setting of every width, fixed or not, loads at least as often as its blocks have
    /// lines (an array of ones: the sum is the loads made), and exactly as often where the
    /// width does not straddle lines
    /// (then the loads are exactly the lines).
    #[test]
    fn every_line_of_every_block_is_loaded() {
        for w in [1, 2, 3, 4, 8, 60, 64, 100, 128, 140, 256, 512, 1024, 1500] {
            let rows = 257;
            let mut raw = vec![1u8; rows * w + LINE];
            let shift = raw.as_ptr().align_offset(LINE);
            let data = &mut raw[shift..shift + rows * w];
            let offsets: Vec<u64> = (0..rows)
                .map(|i| ((i * 97 + 31) % rows * w) as u64)
                .chain(std::iter::repeat_n((rows - 1) as u64 * w as u64, 1))
                .collect();
            let need: usize = offsets[..rows].iter().map(|&o| lines(o as usize, w)).sum();
            for (distance, unroll, hint) in [(0, 1, 0), (1, 4, 1), (1, 8, 3), (1, 2, 2)] {
                // SAFETY: every offset's block lies inside `data`; `offsets` holds rows + 1.
                let got = unsafe {
                    floor_read(
                        data.as_ptr(),
                        offsets.as_ptr(),
                        rows,
                        rows + 1,
                        w,
                        0,
                        rows,
                        2,
                        2,
                        distance,
                        unroll,
                        hint,
                    )
                } as usize;
                let per_pass = got / 2;
                assert!(
                    per_pass >= need,
                    "width {w}: {per_pass} loads, {need} lines"
                );
                if !straddles(w) {
                    assert_eq!(per_pass, need, "width {w}");
                }
            }
        }
    }
    /// Every setting of every width copies every block to its place: with one segment (a
    /// whole gather) each thread's region ends equal to the gather; with segments of a few
    /// blocks (batches), each region holds the last segment its thread wrote, which is some
    /// segment of the gather.
    #[test]
    fn the_gather_floor_gathers() {
        for w in [
            1, 2, 3, 4, 8, 16, 32, 60, 64, 100, 128, 140, 256, 512, 1024, 1500,
        ] {
            let rows = 300;
            let data: Vec<u8> = (0..rows * w)
                .map(|i| ((i * 7 + i / w) % 255 + 1) as u8)
                .collect();
            let n = 2100; // more than two chunks: both threads work
            let offsets: Vec<u64> = (0..n + 64)
                .map(|i| ((i * 97 + 31) % rows * w) as u64)
                .collect();
            // SAFETY: every offset's block lies inside `data` (asked of the library too).
            assert!(unsafe { floor_offsets_fit(offsets.as_ptr(), offsets.len(), w, data.len()) });
            let want: Vec<u8> = offsets[..n]
                .iter()
                .flat_map(|&o| data[o as usize..o as usize + w].iter().copied())
                .collect();
            // `per_call` makes the split `shared` whatever is asked.
            for (seg, threads, shared, per_call) in [
                (n, 1, false, false),
                (n, 2, false, false),
                (7, 1, false, false),
                (3, 2, false, false),
                (n, 2, true, false),
                (7, 2, true, false),
                (n, 1, false, true),
                (n, 2, false, true),
                (7, 2, true, true),
                (3, 2, false, true),
                (11, 2, true, true), // the stretch ends in part of a segment
                (11, 1, false, true),
            ] {
                let shared = shared || per_call;
                for (distance, unroll, hint, nt) in [
                    (0, 1, 0, false),
                    (8, 4, 1, true),
                    (64, 8, 3, false),
                    (1, 2, 2, true),
                ] {
                    // On a line, and 16 or 48 bytes past one (an output placed as `data`).
                    for skew in [0, 16, 48] {
                        let mut raw = vec![0u8; 2 * seg * w + 128];
                        let shift = raw.as_ptr().align_offset(64) + skew;
                        let out = &mut raw[shift..shift + 2 * seg * w];
                        // SAFETY: as above; `out` holds two regions of `seg` blocks, 16-aligned.
                        let got = unsafe {
                            floor_gather(
                                data.as_ptr(),
                                offsets.as_ptr(),
                                n,
                                offsets.len(),
                                w,
                                out.as_mut_ptr(),
                                out.len(),
                                seg,
                                0,
                                n,
                                2,
                                threads,
                                shared,
                                distance,
                                unroll,
                                hint,
                                nt,
                                distance % 16 == 8 || distance == 1, // `narrow` on some
                                distance == 1,                       // and `early`
                                per_call,
                            )
                        };
                        assert_eq!(got, 2 * n as u64, "width {w}");
                        let what = format!(
                            "width {w}, seg {seg}, threads {threads} shared {shared}, nt {nt}, \
                         skew {skew}, per call {per_call}"
                        );
                        // Each block of a thread's region is the block of that place in some
                        // segment (the segments a chunk of work crosses may differ per place), or
                        // untouched (zeros: the data has none) when the other thread did them all.
                        let regions = if shared { 1 } else { threads };
                        for region in out.chunks_exact(seg * w).take(regions) {
                            for (j, got) in region.chunks_exact(w).enumerate() {
                                let ok = (j..n)
                                    .step_by(seg)
                                    .any(|i| got == &want[i * w..(i + 1) * w]);
                                let untouched = threads == 2 && got.iter().all(|&b| b == 0);
                                assert!(ok || untouched, "{what}, place {j}");
                            }
                        }
                        if seg == n && (threads == 1 || shared) {
                            assert!(out[..n * w] == want[..], "{what}");
                        }
                        if seg == n {
                            // Every place was written by one thread or the other.
                            let written = (0..n).all(|j| {
                                let place =
                                    |r: usize| &out[r * n * w + j * w..r * n * w + (j + 1) * w];
                                place(0).iter().any(|&b| b != 0)
                                    || place(threads - 1).iter().any(|&b| b != 0)
                            });
                            assert!(written, "{what}");
                        }
                    }
                }
            }
            // Sizes that do not hold the work are refused.
            let mut small = vec![0u8; w + 64];
            let shift = small.as_ptr().align_offset(64);
            // SAFETY: refused before any block is copied (the region does not fit).
            let got = unsafe {
                floor_gather(
                    data.as_ptr(),
                    offsets.as_ptr(),
                    n,
                    offsets.len(),
                    w,
                    small[shift..].as_mut_ptr(),
                    w,
                    2,
                    0,
                    n,
                    1,
                    1,
                    false,
                    0,
                    1,
                    0,
                    false,
                    false,
                    false,
                    false,
                )
            };
            assert_eq!(got, 0);
        }
    }
}
