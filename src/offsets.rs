//! From indices to source offsets: resolving an index on its axis, the
//! offsets of a run of rows (checking their indices as they go), and the
//! scan that finds the first bad index in C order for the error message.

use crate::hints;
use crate::index::IndexElem;
use crate::plan::{Plan, TupleAxis};
use crate::walk::Odometer;

/// Offset marking a row whose slice is zero-filled (`Mode::Zero`). Never a
/// real offset: those lie within one allocation, far from `isize::MIN`.
pub(crate) const ZERO_FILL: isize = isize::MIN;

/// Requests the slice of `bytes` at `src + off` ([`hints::slice`]), none
/// for the zero-fill marker (which only `ZERO` calls have).
#[inline(always)]
pub(crate) fn prefetch_row<const ZERO: bool>(
    src: *const u8,
    off: isize,
    bytes: usize,
    far: bool,
    tail: bool,
) {
    if !(ZERO && off == ZERO_FILL) {
        hints::slice(src.wrapping_offset(off), bytes, far, tail);
    }
}

/// Resolves an index on an axis of `size`: negatives count from the end
/// when `wrap`, else they address nothing (or clip to 0); `None` if it
/// addresses nothing (with `CLIP`, only on an empty axis).
#[inline(always)]
pub(crate) fn resolve<const CLIP: bool>(v: i64, size: usize, wrap: bool) -> Option<usize> {
    let s = size as i64;
    if CLIP {
        // No overflow: s >= 0, so v + s >= i64::MIN + 0 when v < 0.
        let v = if v < 0 && wrap { v + s } else { v };
        return (s > 0).then(|| v.clamp(0, s - 1) as usize);
    }
    // Branch-free, as the offsets loop wants: a negative `v` gains `s` when
    // wrapping (v >> 63 is all ones exactly when v < 0), and one unsigned
    // compare then rejects every value outside 0..s, negatives included.
    let v = v + ((v >> 63) & s & -(wrap as i64));
    ((v as u64) < (s as u64)).then_some(v as usize)
}

/// A row whose index addresses nothing (at the row's position in the
/// walked range).
pub(crate) struct BadRow;

/// Fills `offsets` with the byte offsets, from element `[0, ..., 0]` of
/// `data`, of the slices of the next `offsets.len()` rows. Runs along the
/// innermost row axis, where both strides are constant.
///
/// # Safety
/// `od` must walk rows of `plan.rows` that exist (the plan's views are
/// checked views, as every plan's are).
#[inline(always)]
pub(crate) unsafe fn compute_offsets<T: IndexElem, const CLIP: bool, const ZERO: bool>(
    plan: &Plan<'_>,
    od: &mut Odometer,
    offsets: &mut [isize],
) -> Result<(), BadRow> {
    let mut done = 0;
    while done < offsets.len() {
        let run = od.inner_left(&plan.rows).min(offsets.len() - done);
        let mut slots = &mut offsets[done..done + run];
        // SAFETY: forwarded; the run stays on existing rows.
        let wide = unsafe { wide_offsets::<T, CLIP>(plan, od, slots) };
        od.skip_inner(&plan.rows, wide);
        done += wide;
        slots = &mut slots[wide..];
        let run = slots.len();
        // SAFETY: forwarded; the run stays on existing rows.
        unsafe {
            match plan.tuple.as_slice() {
                // Short tuples as arrays: their loop unrolls.
                [axis] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*axis], slots)?,
                [a, b] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*a, *b], slots)?,
                [a, b, c] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*a, *b, *c], slots)?,
                all => run_offsets::<T, CLIP, ZERO, _>(plan, od, all, slots)?,
            }
        }
        od.skip_inner(&plan.rows, run);
        done += run;
    }
    Ok(())
}

/// The first offsets of a run along the innermost row axis eight at a time,
/// where the CPU has AVX-512F and DQ (`machine::wide_vectors`): tuples of
/// one to four `i64` or `i32` indices, each tuple's indices
/// side by side and the tuples one after the other, the data offset the
/// same for every row of the run (a Gather's rows along its index axis, a
/// GatherND's tuples without batch dimensions) or a constant step apart
/// (the innermost row axis a batch axis, one tuple a batch: `ov_gnd8_xml3`,
/// whose scalar loop was a third of a profile). Clips as [`resolve`] does
/// with `CLIP`; without, stops before the first eight that hold an index
/// outside its axis, for the scalar loop to report or zero-fill. Returns how
/// many slots it filled (a multiple of eight).
/// The scalar loop spends about 14 instructions an index (`gather_batch`:
/// 18% of a sampling profile, one million indices resolved a call;
/// `points_2m`'s pairs: a quarter of a two-thread profile).
///
/// # Safety
/// As for [`run_offsets`].
#[inline(always)]
unsafe fn wide_offsets<T: IndexElem, const CLIP: bool>(
    plan: &Plan<'_>,
    od: &Odometer,
    slots: &mut [isize],
) -> usize {
    match plan.rows.last() {
        // SAFETY: forwarded; the run's rows' tuples lie `index_stride` apart
        // from the odometer's position, their slices `data_stride` apart.
        Some(inner) => unsafe {
            let (step, base) = (inner.index_stride, od.data_off);
            wide_run::<T, CLIP>(plan, od.index_off, step, base, inner.data_stride, slots)
        },
        None => 0,
    }
}

/// [`wide_offsets`] for the `slots.len()` tuples `step` bytes apart from
/// `index_off` (from the first index of `indices`), the offset of row `r`
/// from `base + r * row_stride`: 0 unless they lie one after the other
/// (`step` a tuple's size, its indices side by side) and the CPU has the
/// loop.
///
/// # Safety
/// Those tuples are tuples of existing index rows of `plan`.
#[inline(always)]
unsafe fn wide_run<T: IndexElem, const CLIP: bool>(
    plan: &Plan<'_>,
    index_off: isize,
    step: isize,
    base: isize,
    row_stride: isize,
    slots: &mut [isize],
) -> usize {
    let count = slots.len();
    // SAFETY: forwarded; `slots` holds the `count` offsets.
    unsafe { wide_tuples::<T, CLIP, true>(plan, index_off, step, (base, row_stride), count, slots) }
}

/// [`wide_run`] without the offsets: how many of the `count` tuples `step`
/// bytes apart from `index_off` it found good, eight at a time, up to the
/// first eight that hold a bad index (0 where the CPU lacks the loop). A
/// validation's pass, which has no use for the offsets: computing them into
/// a scratch buffer it zeroed for every run of rows cost `ov_gnd8_xml3`'s
/// `out=` with `mode="raise"` 1.04x the time (docs/performance.md).
///
/// # Safety
/// As for [`wide_run`].
#[inline(always)]
unsafe fn wide_check<T: IndexElem, const CLIP: bool>(
    plan: &Plan<'_>,
    index_off: isize,
    step: isize,
    count: usize,
) -> usize {
    // SAFETY: forwarded; nothing is stored.
    unsafe { wide_tuples::<T, CLIP, false>(plan, index_off, step, (0, 0), count, &mut []) }
}

/// [`wide_run`] (`STORE`: into `slots`, `count` long) and [`wide_check`].
///
/// # Safety
/// As for [`wide_run`]; with `STORE`, `slots` holds `count` offsets.
#[inline(always)]
unsafe fn wide_tuples<T: IndexElem, const CLIP: bool, const STORE: bool>(
    plan: &Plan<'_>,
    index_off: isize,
    step: isize,
    rows: (isize, isize),
    count: usize,
    slots: &mut [isize],
) -> usize {
    debug_assert!(!STORE || slots.len() == count);
    #[cfg(target_arch = "x86_64")]
    {
        use std::any::TypeId;
        let wide = if TypeId::of::<T>() == TypeId::of::<i64>() {
            true
        } else if TypeId::of::<T>() == TypeId::of::<i32>() {
            false
        } else {
            return 0;
        };
        let id_bytes: isize = if wide { 8 } else { 4 };
        let k = plan.tuple.len() as isize;
        if count < 8
            || step != k * id_bytes
            || (k > 1 && plan.tuple_stride != id_bytes)
            || !crate::machine::wide_vectors()
            // Clipping on an empty axis is an error the scalar loop reports.
            || (CLIP && plan.tuple.iter().any(|a| a.size == 0))
        {
            return 0;
        }
        // SAFETY: checked-view invariant (a) of `indices`: within its bytes
        // or one past them; the tuples are existing rows' (caller), one
        // after the other from `index_off` (`step` = a tuple's size, its
        // indices side by side).
        let ids = unsafe {
            plan.indices
                .bytes
                .as_ptr()
                .add(plan.indices.offset)
                .offset(index_off)
        };
        let wrap = plan.wrap_negative;
        macro_rules! by_eight {
            ($($axes:pat => $k:literal, $list:expr;)*) => {
                match plan.tuple.as_slice() {
                    // SAFETY: the CPU has AVX-512F and DQ (`wide_vectors`);
                    // `ids` holds `count` tuples of $k indices of `id_bytes`
                    // (above); with `STORE`, `slots` their `count` offsets.
                    $($axes => unsafe {
                        if wide {
                            offsets_by_eight::<true, CLIP, $k, STORE>($list, ids, rows, wrap, count, slots)
                        } else {
                            offsets_by_eight::<false, CLIP, $k, STORE>($list, ids, rows, wrap, count, slots)
                        }
                    },)*
                    _ => 0,
                }
            };
        }
        // Longer tuples stay scalar: de-interleaving costs K * K lane
        // permutes per eight tuples, and they are rare (a GatherND tuple
        // indexes that many leading axes).
        return by_eight!(
            [a] => 1, [*a];
            [a, b] => 2, [*a, *b];
            [a, b, c] => 3, [*a, *b, *c];
            [a, b, c, d] => 4, [*a, *b, *c, *d];
        );
    }
    #[allow(unreachable_code)]
    0
}

/// [`wide_offsets`]' loop: `base + r * row_stride + sum_j resolve(id_j) *
/// axes[j].data_stride` (`rows` is `(base, row_stride)`) for each tuple `r`
/// of the `count` tuples of `K` indices at `ids` (`i64` if
/// `WIDE`, else `i32`), eight tuples at a time, as [`resolve`] does it,
/// stored in `slots` if `STORE` (else only checked: [`wide_check`]);
/// without `CLIP`, stops before the first eight with an index outside its
/// axis. How many it filled (or found good).
///
/// # Safety
/// `ids` is readable for `count * K` indices; with `STORE`, `slots` holds
/// `count` offsets; only on a CPU with AVX-512F and AVX-512DQ; with `CLIP`,
/// no axis is empty.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
#[link_section = "ndgather_dispatched"]
unsafe fn offsets_by_eight<
    const WIDE: bool,
    const CLIP: bool,
    const K: usize,
    const STORE: bool,
>(
    axes: [TupleAxis; K],
    ids: *const u8,
    rows: (isize, isize),
    wrap: bool,
    count: usize,
    slots: &mut [isize],
) -> usize {
    use std::arch::x86_64::*;
    // Sizes and strides are below 2^63: as `i64` lanes they keep their values.
    let sizes: [__m512i; K] = std::array::from_fn(|j| _mm512_set1_epi64(axes[j].size as i64));
    let lasts: [__m512i; K] =
        std::array::from_fn(|j| _mm512_set1_epi64(axes[j].size.wrapping_sub(1) as i64));
    let strides: [__m512i; K] =
        std::array::from_fn(|j| _mm512_set1_epi64(axes[j].data_stride as i64));
    // Row r of the eight at `at`: base + (at + r) * row_stride, wrapping as
    // the scalar loop's sum does.
    let (base, row_stride) = (rows.0 as i64, rows.1 as i64);
    let lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    let mut base_v = _mm512_add_epi64(
        _mm512_set1_epi64(base),
        _mm512_mullo_epi64(lane, _mm512_set1_epi64(row_stride)),
    );
    let next_eight = _mm512_set1_epi64(row_stride.wrapping_mul(8));
    // Eight tuples load as K vectors of eight indices, index j of tuple t at
    // position K * t + j: lane (K * t + j) % 8 of vector (K * t + j) / 8.
    // `lanes[j][v]`: which lanes of index j's vector come from vector v, and
    // from which of its lanes.
    let lanes: [[(__mmask8, __m512i); K]; K] = std::array::from_fn(|j| {
        std::array::from_fn(|v| {
            let (mut mask, mut from) = (0u8, [0i64; 8]);
            for (t, lane) in from.iter_mut().enumerate() {
                let at = K * t + j;
                if at / 8 == v {
                    mask |= 1 << t;
                    *lane = (at % 8) as i64;
                }
            }
            // SAFETY: `[i64; 8]` and `__m512i` are both 64 plain bytes.
            (mask, unsafe {
                std::mem::transmute::<[i64; 8], __m512i>(from)
            })
        })
    });
    let id_bytes = if WIDE { 8 } else { 4 };
    let mut at = 0;
    while at + 8 <= count {
        // SAFETY: indices K * at .. K * (at + 8) are readable (caller);
        // unaligned loads take any address.
        let loaded: [__m512i; K] = std::array::from_fn(|v| unsafe {
            let p = ids.add(id_bytes * (K * at + 8 * v));
            if WIDE {
                _mm512_loadu_si512(p.cast())
            } else {
                _mm512_cvtepi32_epi64(_mm256_loadu_si256(p.cast()))
            }
        });
        let (mut off, mut bad) = (base_v, 0u8);
        for j in 0..K {
            let mut x = loaded[0];
            if K > 1 {
                for (v, &(mask, from)) in lanes[j].iter().enumerate() {
                    x = _mm512_mask_permutexvar_epi64(x, mask, from, loaded[v]);
                }
            }
            // A negative index gains the size when wrapping; then one
            // unsigned compare rejects everything outside 0..size,
            // negatives included, or a clamp brings it into 0..size.
            if wrap {
                let negative = _mm512_cmplt_epi64_mask(x, _mm512_setzero_si512());
                x = _mm512_mask_add_epi64(x, negative, x, sizes[j]);
            }
            if CLIP {
                x = _mm512_min_epi64(_mm512_max_epi64(x, _mm512_setzero_si512()), lasts[j]);
            } else {
                bad |= _mm512_cmpge_epu64_mask(x, sizes[j]);
            }
            // Wrapping multiply and add, as the scalar loop's.
            off = _mm512_add_epi64(off, _mm512_mullo_epi64(x, strides[j]));
        }
        if bad != 0 {
            break;
        }
        if STORE {
            debug_assert!(at + 8 <= slots.len());
            // SAFETY: slots at..at + 8 lie in `slots` (`count` long with
            // `STORE`: caller); `isize` is 64 bits here.
            unsafe { _mm512_storeu_si512(slots.as_mut_ptr().add(at).cast(), off) };
        }
        base_v = _mm512_add_epi64(base_v, next_eight);
        at += 8;
    }
    at
}

/// One run along the innermost row axis; `axes` are the tuple's axes.
///
/// # Safety
/// As for [`compute_offsets`]; `slots.len() <= od.inner_left()`.
#[inline(always)]
unsafe fn run_offsets<T: IndexElem, const CLIP: bool, const ZERO: bool, A: AsRef<[TupleAxis]>>(
    plan: &Plan<'_>,
    od: &Odometer,
    axes: A,
    slots: &mut [isize],
) -> Result<(), BadRow> {
    let inner = plan.rows[plan.rows.len() - 1];
    // SAFETY: checked-view invariant (a) of `indices`: within its bytes or
    // one past them.
    let index_base = unsafe { plan.indices.bytes.as_ptr().add(plan.indices.offset) };
    let (mut data_off, mut index_off) = (od.data_off, od.index_off);
    for slot in slots.iter_mut() {
        // SAFETY: `index_off` is the offset of an existing row's tuple, an
        // in-range position of `indices`: inside its bytes by the
        // checked-view invariant (b).
        let tuple = unsafe { index_base.offset(index_off) };
        let mut off = data_off;
        let mut ok = true;
        for (j, axis) in axes.as_ref().iter().enumerate() {
            // SAFETY: position j < k of the tuple is an in-range position
            // of `indices`, whose `itemsize` bytes lie inside its bytes
            // (checked-view invariant (b)).
            let v = unsafe { T::load(tuple.offset(j as isize * plan.tuple_stride)) };
            // No branch per index: a bad one only clears `ok`, and the
            // offset it spoils is never used.
            let x = resolve::<CLIP>(v, axis.size, plan.wrap_negative);
            ok &= x.is_some();
            off = off.wrapping_add((x.unwrap_or(0) as isize).wrapping_mul(axis.data_stride));
        }
        *slot = if ok {
            off
        } else if ZERO {
            ZERO_FILL
        } else {
            return Err(BadRow);
        };
        data_off += inner.data_stride;
        index_off += inner.index_stride;
    }
    Ok(())
}

/// Asks the cache for the indices of rows `skip .. skip + rows` after the
/// odometer's position along the innermost row axis (when its index stride
/// is positive; none otherwise). The index stream is read in order, but
/// while the copy keeps the miss buffers full of random rows the hardware
/// prefetcher falls behind on it, and the offsets loop then waits on its
/// own loads. A hint only: rows past the axis's end are wrong addresses,
/// which a prefetch ignores.
#[inline(always)]
pub(crate) fn prefetch_index_rows(plan: &Plan<'_>, od: &Odometer, skip: usize, rows: usize) {
    let Some(inner) = plan.rows.last() else {
        return;
    };
    let Ok(stride) = usize::try_from(inner.index_stride) else {
        return;
    };
    let base = plan
        .indices
        .first()
        .wrapping_offset(od.index_off)
        .wrapping_add(skip.wrapping_mul(stride));
    hints::lines(base, rows.wrapping_mul(stride), false);
}

/// Finds the first stored index (C order of `indices`) among index rows
/// `rows` that addresses nothing: `(row, position in tuple)`.
///
/// # Safety
/// `rows.end <= plan.n_index_rows`.
pub(crate) unsafe fn first_bad<T: IndexElem, const CLIP: bool>(
    plan: &Plan<'_>,
    rows: std::ops::Range<usize>,
) -> Option<(usize, usize)> {
    let dims = &plan.index_rows;
    let mut od = Odometer::new(dims, rows.start);
    let mut row = rows.start;
    while row < rows.end {
        let run = od.inner_left(dims).min(rows.end - row);
        // SAFETY: forwarded; the run stays on existing index rows.
        let bad = unsafe {
            match plan.tuple.as_slice() {
                [axis] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*axis], run),
                [a, b] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*a, *b], run),
                [a, b, c] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*a, *b, *c], run),
                all => first_bad_in_run::<T, CLIP, _>(plan, &od, all, run),
            }
        };
        if let Some((r, j)) = bad {
            return Some((row + r, j));
        }
        od.skip_inner(dims, run);
        row += run;
    }
    None
}

/// Index rows validated between two looks at the verdict: the check
/// itself has no branch, so the loop runs at the speed of the loads.
const CHECK_CHUNK: usize = 64;

/// Index rows a validation checks eight at a time between two looks at
/// the verdict (`wide_check`).
const WIDE_CHECK_ROWS: usize = 256;

/// The first bad index in `run` index rows along the innermost axis from
/// the odometer's position: `(row within the run, position in tuple)`.
///
/// # Safety
/// As for [`first_bad`]; `run <= od.inner_left()`.
#[inline(always)]
unsafe fn first_bad_in_run<T: IndexElem, const CLIP: bool, A: AsRef<[TupleAxis]>>(
    plan: &Plan<'_>,
    od: &Odometer,
    axes: A,
    run: usize,
) -> Option<(usize, usize)> {
    let axes = axes.as_ref();
    let step = plan.index_rows[plan.index_rows.len() - 1].index_stride;
    // SAFETY: checked-view invariant (a) of `indices`: within its bytes or
    // one past them.
    let index_base = unsafe { plan.indices.bytes.as_ptr().add(plan.indices.offset) };
    let good = |r: usize, j: usize| {
        // SAFETY: row r < run of this run and position j < k of its tuple
        // make an in-range position of `indices`, inside its bytes by the
        // checked-view invariant (b).
        let v = unsafe {
            let tuple = index_base.offset(od.index_off + r as isize * step);
            T::load(tuple.offset(j as isize * plan.tuple_stride))
        };
        resolve::<CLIP>(v, axes[j].size, plan.wrap_negative).is_some()
    };
    // Eight tuples at a time where the CPU allows, up to the first eight
    // that hold a bad index, which the loop below then finds.
    let mut start = 0;
    while start < run {
        let len = (run - start).min(WIDE_CHECK_ROWS);
        let at = od.index_off + start as isize * step;
        // SAFETY: rows start..start + len of this run exist (caller).
        let good = unsafe { wide_check::<T, CLIP>(plan, at, step, len) };
        start += good;
        if good < len {
            break;
        }
    }
    while start < run {
        let end = (start + CHECK_CHUNK).min(run);
        let all_good = (start..end).fold(true, |ok, r| {
            (0..axes.len()).fold(ok, |ok, j| ok & good(r, j))
        });
        if !all_good {
            for r in start..end {
                if let Some(j) = (0..axes.len()).find(|&j| !good(r, j)) {
                    return Some((r, j));
                }
            }
        }
        start = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_wraps_and_checks() {
        assert_eq!(resolve::<false>(-1, 3, true), Some(2));
        assert_eq!(resolve::<false>(-3, 3, true), Some(0));
        assert_eq!(resolve::<false>(-4, 3, true), None);
        assert_eq!(resolve::<false>(3, 3, true), None);
        assert_eq!(resolve::<false>(i64::MIN, 3, true), None);
        assert_eq!(resolve::<false>(i64::MAX, 3, true), None);
        assert_eq!(resolve::<false>(i64::MIN, isize::MAX as usize, true), None);
        assert_eq!(
            resolve::<false>(-(isize::MAX as i64), isize::MAX as usize, true),
            Some(0)
        );
        assert_eq!(resolve::<false>(0, 0, true), None);
    }

    #[test]
    fn resolve_clips_after_wrapping() {
        assert_eq!(resolve::<true>(-1, 3, true), Some(2));
        assert_eq!(resolve::<true>(-7, 3, true), Some(0));
        assert_eq!(resolve::<true>(9, 3, true), Some(2));
        assert_eq!(resolve::<true>(0, 0, true), None);
    }

    #[test]
    fn negatives_can_be_out_of_range() {
        assert_eq!(resolve::<false>(-1, 3, false), None);
        assert_eq!(resolve::<false>(2, 3, false), Some(2));
        assert_eq!(resolve::<true>(-1, 3, false), Some(0));
    }
}
