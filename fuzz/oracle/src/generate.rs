//! The generators: arrays of any geometry, index values and the way a
//! call is made, drawn from the bytes of one input.

use arbitrary::{Result, Unstructured};
use ndgather::{IndexType, Mode, Validation};

use crate::{count, for_each_coord, Array, Exec, MAX_ELEMS};

/// Largest buffer the generators build for one array (its touched bytes).
pub const MAX_SPAN: usize = 1 << 20;

/// True one time in `n` (on the fuzzer's choice). False once the input is
/// used up, so that the rare branches stay rare for short inputs
/// (`Unstructured::ratio` is true then).
pub fn one_in(u: &mut Unstructured<'_>, n: u32) -> Result<bool> {
    Ok(u.int_in_range(1..=n)? == n)
}

/// Bytes that differ from their neighbours, computed once: buffers are
/// filled by copying from it (a byte loop per call would cost more than
/// the gather, with every compare traced for the fuzzer).
pub fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        (0..MAX_SPAN + 64)
            .map(|i| ((i as u64 ^ 0x5555).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect()
    })
}

/// Fills `bytes` with [`pattern`].
fn fill_pattern(bytes: &mut [u8]) {
    for chunk in bytes.chunks_mut(MAX_SPAN) {
        chunk.copy_from_slice(&pattern()[..chunk.len()]);
    }
}

/// Stores `v` as `ty` (truncated as a C cast would).
fn store(ty: IndexType, v: i128, b: &mut [u8]) {
    let w = ty.itemsize();
    let bytes: [u8; 8] = match ty {
        IndexType::I8 | IndexType::U8 => {
            let mut a = [0; 8];
            a[0] = v as u8;
            a
        }
        IndexType::I16 | IndexType::U16 => {
            let mut a = [0; 8];
            a[..2].copy_from_slice(&(v as u16).to_ne_bytes());
            a
        }
        IndexType::I32 | IndexType::U32 => {
            let mut a = [0; 8];
            a[..4].copy_from_slice(&(v as u32).to_ne_bytes());
            a
        }
        IndexType::I64 | IndexType::U64 => (v as u64).to_ne_bytes(),
    };
    b[..w].copy_from_slice(&bytes[..w]);
}

const INDEX_TYPES: [IndexType; 8] = [
    IndexType::I8,
    IndexType::I16,
    IndexType::I32,
    IndexType::I64,
    IndexType::U8,
    IndexType::U16,
    IndexType::U32,
    IndexType::U64,
];

pub fn index_type(u: &mut Unstructured<'_>) -> Result<IndexType> {
    Ok(INDEX_TYPES[u.choose_index(INDEX_TYPES.len())?])
}

pub fn mode(u: &mut Unstructured<'_>) -> Result<Mode> {
    Ok([Mode::Raise, Mode::Zero, Mode::Clip][u.choose_index(3)?])
}

/// An element width: the kernel's fixed widths, odd ones, zero, and large.
pub fn itemsize(u: &mut Unstructured<'_>) -> Result<usize> {
    const W: [usize; 20] = [
        1, 2, 4, 8, 3, 6, 12, 16, 24, 32, 48, 64, 128, 5, 7, 10, 20, 40, 100, 0,
    ];
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=239 => W[x as usize % W.len()],
        240..=254 => u.int_in_range(1..=300)?,
        255 => u.int_in_range(1..=4096)?,
    })
}

/// A dimension: mostly tiny, sometimes tens, rarely large or absurd (the
/// latter only fit a buffer with zero strides, or next to an empty axis).
pub fn dim(u: &mut Unstructured<'_>) -> Result<usize> {
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=199 => (x % 5) as usize,
        200..=239 => (x % 40) as usize,
        240..=251 => u.int_in_range(0..=600)?,
        252..=254 => u.int_in_range(0..=40_000)?,
        255 => u.arbitrary::<usize>()?,
    })
}

/// How the generators may lay an array out.
#[derive(Clone, Copy)]
pub struct LayoutOptions {
    /// Whether the buffer may get a 4 MiB zeroed tail (large enough for the
    /// kernel's prefetching path).
    pub big_tail: bool,
}

/// An array of `shape` in any layout: C order, permuted axes with gaps and
/// reversed or broadcast (zero-stride) axes, or raw strides of any sign
/// (overlapping, unaligned); rarely a broken offset or buffer length.
/// `None` if its buffer would be too large.
pub fn array(
    u: &mut Unstructured<'_>,
    shape: Vec<usize>,
    itemsize: usize,
    opts: LayoutOptions,
) -> Result<Option<Array>> {
    let n = shape.len();
    let mut strides = vec![0isize; n];
    let style: u8 = u.int_in_range(0..=3)?;
    if style == 2 {
        for s in strides.iter_mut() {
            *s = if one_in(u, 32)? {
                u.arbitrary()?
            } else {
                u.int_in_range(-300..=300)?
            };
        }
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        if style != 0 {
            for i in (1..n).rev() {
                let j = u.int_in_range(0..=i)?;
                order.swap(i, j);
            }
        }
        let mut step = itemsize as i128;
        for &axis in order.iter().rev() {
            if step > MAX_SPAN as i128 {
                return Ok(None);
            }
            strides[axis] = step as isize;
            let (gap, extra) = if style == 0 {
                (1, 0)
            } else {
                (u.int_in_range(1..=3)?, u.int_in_range(0..=1)? * 3)
            };
            step = step * shape[axis].max(1) as i128 * gap + extra;
        }
        if style != 0 {
            for s in strides.iter_mut() {
                if one_in(u, 3)? {
                    *s = -*s;
                }
                if style == 3 && one_in(u, 3)? {
                    *s = 0;
                }
            }
        }
    }
    let empty = shape.contains(&0);
    let (mut lo, mut hi) = (0i128, 0i128);
    if !empty {
        for (&d, &s) in shape.iter().zip(&strides) {
            let reach = (d as i128 - 1) * s as i128;
            // Saturating: six absurd axes can pass i128 (then far outside).
            if reach < 0 {
                lo = lo.saturating_add(reach);
            } else {
                hi = hi.saturating_add(reach);
            }
        }
    }
    let touched = if empty { 0 } else { hi - lo + itemsize as i128 };
    if touched > MAX_SPAN as i128 {
        return Ok(None);
    }
    let front: usize = u.int_in_range(0..=8)?;
    let back: usize = u.int_in_range(0..=8)?;
    let mut offset = front + (-lo) as usize;
    let mut len = front + touched as usize + back;
    if one_in(u, 24)? {
        // Broken on purpose: the core must reject what reaches outside.
        let by: usize = u.int_in_range(1..=16)?;
        match u.int_in_range(0..=3)? {
            0 => offset += by,
            1 => offset = offset.saturating_sub(by),
            2 => len = len.saturating_sub(by),
            _ => offset = u.arbitrary()?,
        }
    }
    let filled = len;
    if opts.big_tail && one_in(u, 64)? {
        len += (4 << 20) + 1;
    }
    // Zeroed (lazily, for the big tail), then a pattern over the part that
    // may be read.
    let mut bytes = vec![0u8; len];
    fill_pattern(&mut bytes[..filled]);
    Ok(Some(Array {
        bytes,
        offset,
        shape,
        strides,
        itemsize,
    }))
}

/// Writes index values into `indices` in C order (later elements overwrite
/// earlier ones where the layout makes them share bytes). `axis_size`
/// gives, for an element's coordinates, the size of the axis it addresses,
/// so that values cluster around the interesting bounds.
pub fn fill_indices(
    u: &mut Unstructured<'_>,
    indices: &mut Array,
    ty: IndexType,
    axis_size: impl Fn(&[usize]) -> usize,
) -> Result<()> {
    if count(&indices.shape).is_none_or(|c| c > MAX_ELEMS) {
        return Ok(());
    }
    let w = ty.itemsize();
    let shape = indices.shape.clone();
    let mut failed = None;
    for_each_coord(&shape, |coords| {
        match index_value(u, axis_size(coords) as i128) {
            Ok(v) => {
                if let Some(p) = indices.pos(coords) {
                    if p + w <= indices.bytes.len() {
                        store(ty, v, &mut indices.bytes[p..p + w]);
                    }
                }
                true
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    failed.map_or(Ok(()), Err)
}

/// An index for an axis of `s`: mostly near `[-s, s)`, sometimes at the
/// edges of the index types, sometimes anything.
pub(crate) fn index_value(u: &mut Unstructured<'_>, s: i128) -> Result<i128> {
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=199 => (x as i128) % (2 * s + 5) - s - 2,
        200..=229 => {
            let edges = [
                -s - 1,
                -s,
                s - 1,
                s,
                0,
                -1,
                i8::MIN as i128,
                i8::MAX as i128,
                u8::MAX as i128,
                i16::MIN as i128,
                u16::MAX as i128,
                i32::MIN as i128,
                u32::MAX as i128,
                i64::MIN as i128,
                i64::MAX as i128,
                u64::MAX as i128,
                (i64::MAX as i128) + 1,
            ];
            edges[x as usize % edges.len()]
        }
        _ => u.arbitrary::<u64>()? as i128,
    })
}

/// A rank for `data`: 1 to 5, rarely 0 (invalid for gather_nd, a scalar
/// for gather).
pub fn data_rank(u: &mut Unstructured<'_>) -> Result<usize> {
    if one_in(u, 32)? {
        Ok(0)
    } else {
        u.int_in_range(1..=5)
    }
}

pub fn exec(u: &mut Unstructured<'_>) -> Result<Exec> {
    Ok(Exec {
        mode: mode(u)?,
        validation: if u.arbitrary()? {
            Validation::BeforeWriting
        } else {
            Validation::WhileCopying
        },
        threads: if u.arbitrary()? { 2 } else { 1 },
        reject_negative: one_in(u, 4)?,
        out_len_delta: if one_in(u, 32)? {
            u.int_in_range(-2..=2)?
        } else {
            0
        },
    })
}
