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
//!
//! Both repeat their work `reps` times inside one call, so the time per repetition carries no
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
/// [`PREFETCH_LINES`] lines, and the last byte where [`straddles`] says so.
#[inline(always)]
fn prefetch_fixed<const W: usize, const H: i32>(p: *const u8) {
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
        if straddles(W) && W <= upto {
            // SAFETY: as above.
            unsafe { _mm_prefetch::<H>(p.wrapping_add(W - 1).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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
            for u in 0..U {
                if W == 0 {
                    if distance > 0 {
                        prefetch::<H>(at(a[u]), block);
                    }
                    // SAFETY: every offset's block is inside data (the caller's contract).
                    acc = acc.wrapping_add(unsafe { touch(at(c[u]), block) });
                } else {
                    if distance > 0 {
                        prefetch_fixed::<W, H>(at(a[u]));
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

/// Runs `work(first, count)` over `0 .. total` on `threads` threads (the calling one and
/// `threads - 1` spawned), each taking the next `chunk` items until none are left, so that a
/// thread that runs late (a loaded machine) leaves its share to the others; returns the sum
/// of the results.
fn split(
    total: usize,
    threads: usize,
    chunk: usize,
    work: impl Fn(usize, usize) -> u64 + Sync,
) -> u64 {
    let chunk = chunk.max(1);
    let threads = threads.clamp(1, total.div_ceil(chunk).max(1));
    let next = AtomicUsize::new(0);
    let drain = || {
        let mut acc = 0u64;
        loop {
            let first = next.fetch_add(chunk, Ordering::Relaxed);
            if first >= total {
                return acc;
            }
            acc = acc.wrapping_add(work(first, chunk.min(total - first)));
        }
    };
    thread::scope(|s| {
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(drain)).collect();
        let mine = drain();
        handles
            .into_iter()
            .fold(mine, |acc, h| acc.wrapping_add(h.join().unwrap_or(0)))
    })
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
    split(total, threads, CHUNK, |first, len| {
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
    split(total, threads, 1, |first, count| {
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
}
