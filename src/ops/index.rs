//! Data movement by index: gathering and scattering rows, one-hot encoding.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::IndexedRows;

/// Data movement by index: `indices` are u32 views (class labels, token ids, row indices; see
/// the index rule in [`crate::ops`]); any other type is [`crate::Error::DTypeMismatch`].
pub trait IndexOps: MemoryOps {
    /// `dst[i, :] = src[indices[i], :]` for `i in 0..indices.len()`, rows of `cols` elements.
    /// `src` and `dst` are both f32, or both u32 (labels and token ids moved with their
    /// samples).
    ///
    /// An invalid index (not in `0..src.len() / cols`, see the index rule in [`crate::ops`])
    /// never reads outside `src`, but what happens differs by backend, because a GPU kernel
    /// cannot return an error and validating on the host would cost a device round trip:
    /// - CPU: [`crate::Error::InvalidArgument`], returned before anything is written.
    /// - GPU backends: `Ok(())`, and that row of `dst` is filled with NaN (`u32::MAX` for u32
    ///   rows, itself an invalid index further on; the other rows are gathered normally), so it
    ///   shows up in whatever is computed from it.
    fn gather_rows(&self, a: IndexedRows<'_>) -> Result<()>;

    /// `dst[indices[i], :] += src[i, :]` for `i in 0..indices.len()`, rows of `cols` elements
    /// (the backward pass of [`IndexOps::gather_rows`], an embedding's weight gradient). Repeated
    /// indices accumulate. The CPU adds in index order (deterministic); GPU backends use
    /// atomic float adds, so with repeated indices the order of the additions (and so the last
    /// bits of the sums) may differ from run to run. An invalid index (see the index rule in
    /// [`crate::ops`]): CPU, [`crate::Error::InvalidArgument`] before anything is written; GPU
    /// backends, that row of `src` is skipped.
    fn scatter_add_rows(&self, a: IndexedRows<'_>) -> Result<()>;

    /// `out[i, :] = onehot(indices[i])` over `classes` columns. An invalid index (not in
    /// `0..classes`) gives an all-zero row on every backend.
    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()>;
}
