//! A call checked and reduced to sizes: its attributes and buffers
//! against the operator's rules, and the rows, runs and blocks the fill
//! walks.

use super::{BlockQuantized, Codes};
use crate::error::{GatherError, Result};
use crate::validate::invalid;

fn too_large() -> GatherError {
    GatherError::Overflow("GatherBlockQuantized: a size overflows 64 bits".into())
}

/// The call reduced to sizes: output rows of `row` logical elements, and
/// where the scales of a logical element are.
pub(super) struct Geometry {
    /// Output rows: the product of the axes before the gather axis, times
    /// the number of indices.
    pub(super) rows: usize,
    /// The number of indices.
    pub(super) n: usize,
    /// The gather axis' length.
    pub(super) axis: usize,
    /// Logical elements per row: the product of the axes after the gather
    /// axis.
    pub(super) row: usize,
    /// The quantize axis' length.
    pub(super) q: usize,
    /// The product of the axes after the quantize axis.
    pub(super) qn: usize,
    /// Blocks along the quantize axis.
    pub(super) blocks: usize,
    /// The product of the axes before the quantize axis.
    pub(super) outer_q: usize,
    /// Elements per block.
    pub(super) block_size: usize,
}

impl Geometry {
    /// The call `q` with `n` indices, into an output of `out_len` bytes of
    /// elements of `width` bytes, checked (attributes, then the buffers'
    /// lengths) and reduced to sizes.
    pub(super) fn new(
        q: &BlockQuantized<'_>,
        n: usize,
        out_len: usize,
        width: usize,
    ) -> Result<Self> {
        let rank = q.shape.len();
        if q.gather_axis >= rank || q.quantize_axis >= rank {
            return Err(invalid(format!(
                "gather_axis {} and quantize_axis {} must be below the rank {rank}",
                q.gather_axis, q.quantize_axis
            )));
        }
        if q.block_size == 0 {
            return Err(invalid("block_size must be at least 1".into()));
        }
        let product = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(too_large)
        };
        let (g, qa) = (q.gather_axis, q.quantize_axis);
        let elements = product(q.shape)?;
        let (bytes, per_byte) = match q.codes {
            Codes::Packed { bytes, bits } => {
                if !matches!(bits, 2 | 4 | 8) {
                    return Err(invalid(format!("bits must be 2, 4 or 8, got {bits}")));
                }
                let per = (8 / bits) as usize;
                if qa + 1 != rank || !q.shape[rank - 1].is_multiple_of(per) {
                    return Err(invalid(
                        "packed codes need the quantize axis last, a whole number of bytes long"
                            .into(),
                    ));
                }
                (bytes, per)
            }
            Codes::Int4(b) | Codes::UInt4(b) | Codes::Table { bytes: b, .. } => (b, 1),
        };
        if bytes.len() != elements / per_byte {
            return Err(invalid(format!(
                "data has {} bytes, its shape needs {}",
                bytes.len(),
                elements / per_byte
            )));
        }
        let geo = Geometry {
            rows: product(&q.shape[..g])?
                .checked_mul(n)
                .ok_or_else(too_large)?,
            n,
            axis: q.shape[g],
            row: product(&q.shape[g + 1..])?,
            q: q.shape[qa],
            qn: product(&q.shape[qa + 1..])?,
            blocks: q.shape[qa].div_ceil(q.block_size),
            outer_q: product(&q.shape[..qa])?,
            block_size: q.block_size,
        };
        geo.check_buffers(q, out_len, width)?;
        Ok(geo)
    }

    /// Checks the length of the output (`out_len` bytes, elements of
    /// `width` bytes), then those of the scales and zero points.
    fn check_buffers(&self, q: &BlockQuantized<'_>, out_len: usize, width: usize) -> Result<()> {
        let out_elements = self.rows.checked_mul(self.row).ok_or_else(too_large)?;
        if out_len != out_elements.checked_mul(width).ok_or_else(too_large)? {
            return Err(invalid(format!(
                "the output has {out_len} bytes, the result needs {out_elements} elements of \
                 {width} bytes"
            )));
        }
        let n_scales = self
            .outer_q
            .checked_mul(self.blocks)
            .and_then(|v| v.checked_mul(self.qn))
            .ok_or_else(too_large)?;
        if q.scales.len() != n_scales.checked_mul(width).ok_or_else(too_large)? {
            return Err(invalid(format!(
                "scales have {} bytes, the shapes need {n_scales} scales of {width} bytes",
                q.scales.len()
            )));
        }
        let Some(zp) = q.zero_points else {
            return Ok(());
        };
        let need = match q.codes {
            Codes::Packed { bits, .. } => self
                .outer_q
                .checked_mul(self.blocks.div_ceil((8 / bits) as usize))
                .ok_or_else(too_large)?,
            Codes::Int4(_) | Codes::UInt4(_) => n_scales,
            Codes::Table { .. } => {
                return Err(invalid(
                    "zero points are not allowed with float codes".into(),
                ))
            }
        };
        if zp.len() != need {
            return Err(invalid(format!(
                "zero points have {} bytes, the shapes need {need}",
                zp.len()
            )));
        }
        Ok(())
    }
}
