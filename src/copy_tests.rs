//! Tests of `copy.rs`.

use super::*;
use crate::hints::fence;

#[test]
fn small_copies_of_every_width() {
    let src: Vec<u8> = (1..=64).collect();
    for width in 0..=64 {
        let mut dst = [0u8; 66];
        // SAFETY: width <= 64 bytes inside both buffers.
        unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr().add(1), width) };
        assert_eq!(&dst[1..1 + width], &src[..width]);
        assert!(dst[1 + width..].iter().all(|&b| b == 0) && dst[0] == 0);
    }
}

#[test]
fn medium_rows_of_every_width() {
    let table: Vec<u8> = (0..4 * MEDIUM_ROW).map(|i| (i % 251 + 1) as u8).collect();
    for width in SMALL_ROW + 1..=MEDIUM_ROW {
        // Unaligned rows, one repeated, one ending at the table's last byte.
        let offsets = [1, 3 * MEDIUM_ROW - 7, 1, 4 * MEDIUM_ROW - width];
        // Requesting no row ahead, or 1 to 5 rows ahead of the one copied
        // (5: further than there are rows).
        for ahead in 0..=5 {
            let mut out = vec![0u8; offsets.len() * width];
            copy_medium_rows(&table, &offsets, width, &mut out, ahead);
            for (row, &from) in out.chunks_exact(width).zip(&offsets) {
                assert_eq!(row, &table[from..from + width], "{width}, {ahead} ahead");
            }
        }
    }
}

#[test]
#[should_panic]
fn medium_rows_check_their_offsets() {
    let table = [0u8; 200];
    let mut out = [0u8; 100];
    copy_medium_rows(&table, &[101], 100, &mut out, 0);
}

#[test]
fn small_rows_of_every_width_with_zero_fill() {
    let src: Vec<u8> = (1..=255).collect();
    let offsets = [7isize, ZERO_FILL, 0, 130, 3];
    for width in 1..=SMALL_ROW {
        for (pf, tail) in [(NONE, false), (NEAR, true), (FAR, false), (FAR, true)] {
            let mut dst = vec![0xEEu8; offsets.len() * width + 1];
            // SAFETY: every offset + width <= 194 < src.len(); dst holds
            // offsets.len() rows of `width` bytes (and one spare).
            unsafe {
                copy_small_rows::<true>(
                    src.as_ptr(),
                    &offsets,
                    offsets.len(),
                    dst.as_mut_ptr(),
                    width,
                    pf,
                    Ahead {
                        rows: 2,
                        far: pf == FAR,
                        tail,
                        by_sixteen: false,
                        by_pieces: false,
                        to_lines: false,
                    },
                )
            };
            for (row, &off) in dst.chunks_exact(width).zip(&offsets) {
                if off == ZERO_FILL {
                    assert!(row.iter().all(|&b| b == 0));
                } else {
                    assert_eq!(row, &src[off as usize..off as usize + width]);
                }
            }
            assert_eq!(dst[offsets.len() * width], 0xEE, "width {width}");
        }
    }
}

/// A copy of `W`-byte rows into an output `skew` bytes past a line, as the
/// streamed loops take them.
type StreamedCopy = unsafe fn(*const u8, &[isize], usize, *mut u8, Ahead);

/// Checks `copy` on rows of `W` bytes, one zero-filled, near and far
/// prefetches, into an output `skew` bytes past a line: every row exact, the
/// byte after the output untouched.
fn check_streamed_rows<const W: usize>(copy: StreamedCopy, skew: usize) {
    let src: Vec<u8> = (0..2048u32).map(|v| (v * 7 % 251) as u8).collect();
    check_streamed_rows_from::<W>(copy, skew, &src, &[7, ZERO_FILL, 0, 1000, 3, 1024]);
}

/// [`check_streamed_rows`] from `src` at `offsets`.
fn check_streamed_rows_from<const W: usize>(
    copy: StreamedCopy,
    skew: usize,
    src: &[u8],
    offsets: &[isize],
) {
    for far in [false, true] {
        let mut raw = vec![0xEEu8; offsets.len() * W + 128];
        let start = raw.as_ptr().align_offset(64) + skew;
        let dst = &mut raw[start..start + offsets.len() * W + 1];
        let ahead = Ahead {
            rows: 2,
            far,
            tail: true,
            by_sixteen: far,
            by_pieces: false,
            to_lines: false,
        };
        assert!(offsets
            .iter()
            .all(|&o| o == ZERO_FILL || o as usize + W <= src.len()));
        // SAFETY: every offset + W <= src.len() (asserted); `dst` holds
        // offsets.len() rows of W bytes (and one spare) from the alignment
        // the caller asks `copy` to be given.
        unsafe {
            copy(
                src.as_ptr(),
                offsets,
                offsets.len(),
                dst.as_mut_ptr(),
                ahead,
            )
        };
        fence();
        for (row, &off) in dst.chunks_exact(W).zip(offsets) {
            if off == ZERO_FILL {
                assert!(row.iter().all(|&b| b == 0));
            } else {
                assert_eq!(
                    row,
                    &src[off as usize..off as usize + W],
                    "width {W}, skew {skew}, offset {off}"
                );
            }
        }
        assert_eq!(dst[offsets.len() * W], 0xEE, "width {W}");
        assert!(
            raw[..start].iter().all(|&b| b == 0xEE),
            "width {W}, skew {skew}"
        );
    }
}

#[test]
fn streamed_rows_of_the_fixed_widths_with_zero_fill() {
    /// `copy_var` for `W`-byte rows (it asks for a 16-byte aligned output).
    unsafe fn fixed<const W: usize>(src: *const u8, o: &[isize], n: usize, d: *mut u8, a: Ahead) {
        // SAFETY: forwarded from `check_streamed_rows`.
        unsafe { copy_var::<true, true, W>(src, o, n, d, W, a) }
    }
    // 16 bytes past a line: aligned as the stores need, no more.
    check_streamed_rows::<64>(fixed::<64>, 16);
    check_streamed_rows::<128>(fixed::<128>, 16);
    check_streamed_rows::<256>(fixed::<256>, 16);
    check_streamed_rows::<512>(fixed::<512>, 16);
}

/// Whether this CPU runs the whole-line streaming stores (AVX-512F); says
/// so when it does not, as their tests then check nothing.
#[cfg(target_arch = "x86_64")]
fn whole_line_stores_here() -> bool {
    let here = std::arch::is_x86_feature_detected!("avx512f");
    if !here {
        eprintln!("no AVX-512F here: the whole-line streaming stores are not tested");
    }
    here
}

#[test]
#[cfg(target_arch = "x86_64")]
fn streamed_whole_lines_of_the_fixed_widths_with_zero_fill() {
    if !whole_line_stores_here() {
        return;
    }
    /// `stream_whole_lines` for `W`-byte rows (it asks for a 16-byte
    /// aligned output and AVX-512F, checked above).
    unsafe fn lines<const W: usize>(src: *const u8, o: &[isize], n: usize, d: *mut u8, a: Ahead) {
        // SAFETY: forwarded from `check_streamed_rows`; the CPU has AVX-512F.
        unsafe { stream_whole_lines::<true, W, 0>(src, o, n, d, a) }
    }
    // On a line, and 16, 32 and 48 bytes past one (the rows' first and
    // last bytes then go out by 16-byte stores).
    for skew in [0, 16, 32, 48] {
        check_streamed_rows::<64>(lines::<64>, skew);
        check_streamed_rows::<128>(lines::<128>, skew);
        check_streamed_rows::<256>(lines::<256>, skew);
        check_streamed_rows::<512>(lines::<512>, skew);
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn streamed_whole_lines_loaded_a_line_at_a_time_and_shifted() {
    if !whole_line_stores_here() {
        return;
    }
    /// `stream_whole_lines` loading `L` lanes past a line (its safety as
    /// in the test above; the offsets as it asks: `check` below).
    unsafe fn lines<const W: usize, const L: i32>(
        src: *const u8,
        o: &[isize],
        n: usize,
        d: *mut u8,
        a: Ahead,
    ) {
        // SAFETY: forwarded from `check_streamed_rows_from`; AVX-512F.
        unsafe { stream_whole_lines::<true, W, L>(src, o, n, d, a) }
    }
    /// Rows of `W` bytes into an output `skew` bytes past a line, from a
    /// source on a line, each row as far past a line as puts its first
    /// whole output line's bytes `4 * L` past one: rows at both ends of the
    /// source and between, and a zero-filled one.
    fn check<const W: usize, const L: i32>(skew: usize) {
        let raw: Vec<u8> = (0..4096u32 + 64).map(|v| (v * 7 % 251) as u8).collect();
        let start = raw.as_ptr().align_offset(64);
        let src = &raw[start..start + 4096];
        let head = (64 - skew) % 64;
        let phase = (4 * L as usize + 64 - head) % 64;
        let last = ((src.len() - W - phase) / 64 * 64 + phase) as isize;
        let offsets: Vec<isize> = [0, 5, 9, 17, 30]
            .into_iter()
            .map(|k| (64 * k + phase) as isize)
            .chain([ZERO_FILL, last])
            .collect();
        check_streamed_rows_from::<W>(lines::<W, L>, skew, src, &offsets);
    }
    for skew in [0, 16, 32, 48] {
        check::<64, 4>(skew);
        check::<128, 8>(skew);
        check::<256, 12>(skew);
        check::<512, 4>(skew);
        check::<512, 8>(skew);
        check::<512, 12>(skew);
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn streamed_rows_off_a_line_carried_into_whole_lines() {
    if !whole_line_stores_here() {
        return;
    }
    /// `stream_carried_lines` for `W`-byte rows (it asks for an output 16
    /// bytes past a line or more, not on one, and AVX-512F, checked above).
    unsafe fn carried<const W: usize>(src: *const u8, o: &[isize], n: usize, d: *mut u8, a: Ahead) {
        // SAFETY: forwarded from `check_streamed_rows_from`; AVX-512F.
        unsafe { stream_carried_lines::<true, W>(src, o, n, d, a) }
    }
    /// Rows at every offset in a line, at both ends of the source, a
    /// zero-filled one first, between and last; one row alone.
    fn check<const W: usize>(skew: usize) {
        let src: Vec<u8> = (0..4096u32).map(|v| (v * 7 % 251) as u8).collect();
        let last = (src.len() - W) as isize;
        let offsets = [ZERO_FILL, 0, 16, 5, 1000, ZERO_FILL, 52, last, 3, ZERO_FILL];
        check_streamed_rows_from::<W>(carried::<W>, skew, &src, &offsets);
        check_streamed_rows_from::<W>(carried::<W>, skew, &src, &offsets[1..2]);
        check_streamed_rows_from::<W>(carried::<W>, skew, &src, &offsets[7..9]);
    }
    for skew in [16, 32, 48] {
        check::<64>(skew);
        check::<128>(skew);
        check::<256>(skew);
        check::<512>(skew);
        check::<1024>(skew);
    }
}

#[test]
fn streamed_copies_of_every_length_and_alignment() {
    // Short runs by 16-byte stores; from `STREAM_LINES_MIN` on, where the
    // CPU has AVX-512, a whole line a store, from every offset in a line.
    let src: Vec<u8> = (0..5000u32).map(|v| (v * 7 % 251) as u8).collect();
    for offset in 0..65 {
        for len in [
            0, 1, 15, 16, 17, 63, 64, 65, 130, 200, 1023, 1024, 1040, 1100, 4099,
        ] {
            let mut dst = vec![0u8; 4300];
            // SAFETY: both ranges are inside their vectors.
            unsafe { stream_copy(src.as_ptr().add(3), dst.as_mut_ptr().add(offset), len) };
            fence();
            assert_eq!(&dst[offset..offset + len], &src[3..3 + len]);
            assert!(dst[..offset].iter().all(|&b| b == 0));
            assert!(dst[offset + len..].iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn plain_rows_of_run_time_widths_near_and_far_from_any_line_offset() {
    // Rows on a line and 16 or 48 bytes past one (far: copied by 16-byte
    // moves where a multiple of 16 up to 1 KiB), of widths on both sides of
    // those rules; one zero-filled; into an output on a line and 16 bytes
    // past one, stored where they fall or on lines.
    let mut raw: Vec<u8> = (0..8192u32).map(|v| (v * 13 % 251) as u8).collect();
    let base = raw.as_ptr().align_offset(64);
    let src = &mut raw[base..base + 6144];
    let offsets = [16isize, ZERO_FILL, 0, 64, 1000, 48, 2048, 3];
    for width in [
        65, 72, 96, 100, 144, 160, 200, 256, 300, 480, 511, 512, 1024, 1040,
    ] {
        // Far, by 16-byte moves (`machine::Tuning::far_rows_by_sixteen`),
        // by 32-byte pieces (`far_rows_by_pieces`, 65 to 512 bytes) or by
        // `memcpy`, whichever this machine's model takes; stored on lines
        // (`machine::Tuning::lines_stored_min_out_bytes`) or not.
        for (far, by_sixteen, by_pieces, to_lines) in [
            (false, false, false, false),
            (true, false, false, false),
            (true, true, false, false),
            (true, false, true, false),
            (false, false, false, true),
            (true, false, false, true),
            (true, false, true, true),
        ] {
            for at in [0, 16] {
                let len = offsets.len() * width;
                let mut raw_dst = vec![0xEEu8; len + 2 * LINE];
                let d0 = raw_dst.as_ptr().align_offset(LINE) + at;
                let ahead = Ahead {
                    rows: 2,
                    far,
                    tail: true,
                    by_sixteen,
                    by_pieces,
                    to_lines,
                };
                // SAFETY: every offset + width <= 2048 + 1040 <= src.len();
                // the output, `d0 .. d0 + len`, lies inside `raw_dst`.
                unsafe {
                    copy_var::<false, true, 0>(
                        src.as_ptr(),
                        &offsets,
                        offsets.len(),
                        raw_dst.as_mut_ptr().add(d0),
                        width,
                        ahead,
                    )
                };
                assert_rows_copied(&raw_dst, d0, src, &offsets, width);
            }
        }
    }
}

#[test]
fn copies_to_lines_of_every_length_from_every_line_offset() {
    // Destinations at every offset in a line, sources on and off one, of
    // lengths on both sides of the rule's bound (four lines) and of a line's
    // multiples: every byte copied, none written around them.
    let mut raw_src: Vec<u8> = (0..4096u32).map(|v| (v * 13 % 251 + 1) as u8).collect();
    let s0 = raw_src.as_ptr().align_offset(LINE);
    let src = &mut raw_src[s0..s0 + 2048];
    for at in 0..LINE {
        for from in [0, 3, 16, 48] {
            for len in [
                0, 1, 63, 64, 127, 128, 255, 256, 257, 300, 448, 511, 512, 513, 1040,
            ] {
                let mut raw = vec![0u8; 1200 + 3 * LINE];
                let base = raw.as_ptr().align_offset(LINE) + LINE;
                // SAFETY: `from + len <= 1088` inside `src`; the
                // destination, `base + at .. + len`, inside `raw`.
                unsafe {
                    copy_to_lines(src.as_ptr().add(from), raw.as_mut_ptr().add(base + at), len)
                };
                let (head, rest) = raw.split_at(base + at);
                let (copied, tail) = rest.split_at(len);
                assert_eq!(
                    copied,
                    &src[from..from + len],
                    "at {at} from {from} len {len}"
                );
                assert!(
                    head.iter().chain(tail).all(|&b| b == 0),
                    "at {at} len {len}"
                );
            }
        }
    }
}

#[test]
fn far_rows_by_pieces_without_avx_copy_the_same() {
    // `copy_far_pieces`' body as compiled without AVX (each piece two
    // 16-byte moves), which a CPU with AVX never runs: every count of
    // pieces, rows on and off a line, one zero-filled, into an output on a
    // line and 16 bytes past one, nothing written around it.
    let raw: Vec<u8> = (0..8192u32).map(|v| (v * 7 % 253) as u8).collect();
    let base = raw.as_ptr().align_offset(64);
    let src = &raw[base..base + 6144];
    let offsets = [16isize, ZERO_FILL, 0, 64, 1000, 48, 2048, 3];
    for width in (65..=512).step_by(13).chain([96, 128, 511, 512]) {
        for at in [0, 16] {
            let len = offsets.len() * width;
            let mut raw_dst = vec![0xEEu8; len + 2 * LINE];
            let d0 = raw_dst.as_ptr().align_offset(LINE) + at;
            let ahead = Ahead {
                rows: 2,
                far: true,
                tail: true,
                by_sixteen: false,
                by_pieces: true,
                to_lines: false,
            };
            // SAFETY: every offset + width <= 2048 + 512 <= src.len(); the
            // output, `d0 .. d0 + len`, lies inside `raw_dst`; 64 < width
            // <= 512.
            unsafe {
                far_pieces_rows::<true>(
                    src.as_ptr(),
                    &offsets,
                    offsets.len(),
                    raw_dst.as_mut_ptr().add(d0),
                    width,
                    ahead,
                )
            };
            assert_rows_copied(&raw_dst, d0, src, &offsets, width);
        }
    }
}

/// Asserts that `raw_dst` holds, from `d0`, the rows of `width` bytes at
/// `offsets` in `src` (zeros for the zero-fill marker), and its 0xEE fill
/// everywhere else.
fn assert_rows_copied(raw_dst: &[u8], d0: usize, src: &[u8], offsets: &[isize], width: usize) {
    let len = offsets.len() * width;
    let at = d0 % LINE;
    for (row, &off) in raw_dst[d0..d0 + len].chunks_exact(width).zip(offsets) {
        if off == ZERO_FILL {
            assert!(row.iter().all(|&b| b == 0), "width {width}");
        } else {
            let off = off as usize;
            assert_eq!(row, &src[off..off + width], "width {width} at {at}");
        }
    }
    assert!(raw_dst[..d0].iter().all(|&b| b == 0xEE), "width {width}");
    assert!(
        raw_dst[d0 + len..].iter().all(|&b| b == 0xEE),
        "width {width}"
    );
}
