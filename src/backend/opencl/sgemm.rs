//! Which of the OpenCL GEMM kernels (kernels-cl/gemm.cl) a launch uses: `sgemm_split`, the
//! 128 x 128 tile of the CUDA design, or `sgemm_tile64_split`, the 64 x 64 tile. Both split k
//! over the grid's z when the output alone has too few tiles for the device
//! (`ops::gpu::gemm_k_splits`, the rule of the CUDA tensor-core kernels), so a weight gradient
//! (a small output summed over a whole batch) still spreads over every compute unit.
//!
//! Both run 256 work-items. The large tile does four times the work per work-group at a higher
//! rate per compute unit (at 4096^3 on an H100 it reaches 36 TFLOP/s through NVIDIA's OpenCL,
//! the small tile 16), but gives four times fewer work-groups. So the large tile is used when
//! its work-groups, k splits included, number at least half the compute units (a crude model:
//! one resident large work-group runs about as fast as two small ones, so below that line the
//! small tile's extra parallelism wins), the small one otherwise, and always on devices that
//! cannot hold the large tile.

use crate::backend::SgemmKernel;
use crate::error::{Error, Result};
use crate::ops::gpu::gemm_k_splits;

/// The 128 x 128 x 8 kernel, double-buffered, 8 x 8 outputs per work-item.
const LARGE: SgemmKernel = SgemmKernel {
    entry: "sgemm_split",
    tile: (128, 128, 256),
    splits_k: true,
    shared_bytes: 0,
    one_block_per_sm: false,
};

/// The 64 x 64 x 16 kernel, 4 x 4 outputs per work-item.
const SMALL: SgemmKernel = SgemmKernel {
    entry: "sgemm_tile64_split",
    tile: (64, 64, 256),
    splits_k: true,
    shared_bytes: 0,
    one_block_per_sm: false,
};

/// Local memory `sgemm` declares: A and B, two stages of 8 x (128 + 4) floats each.
const LARGE_LOCAL_BYTES: u64 = 2 * 2 * 8 * 132 * 4;

/// What decides whether a device can run the large tile, and how many work-groups fill it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `CL_DEVICE_MAX_WORK_GROUP_SIZE`.
    pub(crate) max_work_group: usize,
    /// `CL_DEVICE_LOCAL_MEM_SIZE` in bytes.
    pub(crate) local_mem: u64,
    /// `CL_DEVICE_MAX_COMPUTE_UNITS`.
    pub(crate) compute_units: u32,
}

/// A device's rule for picking the GEMM kernel of a launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SgemmChoice {
    large_fits: bool,
    compute_units: u32,
    forced: Option<SgemmKernel>,
}

impl SgemmChoice {
    /// The rule for a device with `limits`. `forced` (a tile edge, 64 or 128, from
    /// `ContextOptions::opencl_sgemm_tile`) makes every launch use that kernel; a device that
    /// cannot run the large tile refuses to have it forced.
    pub(crate) fn new(limits: Limits, forced: Option<u32>) -> Result<Self> {
        let large_fits =
            limits.max_work_group >= LARGE.tile.2 as usize && limits.local_mem >= LARGE_LOCAL_BYTES;
        let forced = match forced {
            None => None,
            Some(64) => Some(SMALL),
            Some(128) if large_fits => Some(LARGE),
            Some(128) => {
                return Err(Error::InvalidArgument(format!(
                    "opencl_sgemm_tile 128 needs 256 work-items and {LARGE_LOCAL_BYTES} bytes of \
                     local memory; the device has {} and {}",
                    limits.max_work_group, limits.local_mem
                )));
            }
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "opencl_sgemm_tile must be 64 or 128, not {other}"
                )));
            }
        };
        Ok(SgemmChoice {
            large_fits,
            compute_units: limits.compute_units,
            forced,
        })
    }

    /// The kernel for an `m x n` output summed over `k`.
    pub(crate) fn kernel(&self, m: usize, n: usize, k: usize) -> SgemmKernel {
        if let Some(k) = self.forced {
            return k;
        }
        if !self.large_fits {
            return SMALL;
        }
        let (tm, tn, _) = LARGE.tile;
        let tiles = m
            .div_ceil(tm as usize)
            .saturating_mul(n.div_ceil(tn as usize));
        let splits =
            gemm_k_splits(tiles, m.saturating_mul(n), k, self.compute_units, false) as usize;
        if tiles.saturating_mul(splits).saturating_mul(2) >= self.compute_units as usize {
            LARGE
        } else {
            SMALL
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_work_group: usize, local_mem: u64, compute_units: u32) -> Limits {
        Limits {
            max_work_group,
            local_mem,
            compute_units,
        }
    }

    fn pick(l: Limits, m: usize, n: usize, k: usize) -> &'static str {
        SgemmChoice::new(l, None).unwrap().kernel(m, n, k).entry
    }

    #[test]
    fn large_outputs_take_the_large_tile_and_small_ones_the_small_tile() {
        let h100 = limits(1024, 48 << 10, 132);
        assert_eq!(pick(h100, 4096, 4096, 4096), "sgemm_split");
        // 66 tiles of 128 on 132 compute units: the line, where k is too shallow to split.
        assert_eq!(pick(h100, 128 * 6, 128 * 11, 256), "sgemm_split");
        assert_eq!(pick(h100, 128 * 5, 128 * 13, 256), "sgemm_tile64_split");
        // W1 at batch 256, W2's per-step products.
        assert_eq!(pick(h100, 256, 512, 784), "sgemm_tile64_split");
        assert_eq!(pick(h100, 64, 256, 256), "sgemm_tile64_split");
        // A 2-core CPU device fills with one large tile.
        assert_eq!(pick(limits(4096, 4 << 20, 2), 100, 100, 100), "sgemm_split");
    }

    #[test]
    fn deep_k_splits_count_towards_the_large_tile() {
        let h100 = limits(1024, 48 << 10, 132);
        // W1's first weight gradient at batch 4096: 28 tiles of 128, k split in 5.
        assert_eq!(pick(h100, 512, 784, 4096), "sgemm_split");
        // W2's output-layer weight gradient: 2 tiles of 128 even split 16 ways; 8 of 64 split.
        assert_eq!(pick(h100, 96, 256, 4096), "sgemm_tile64_split");
    }

    #[test]
    fn devices_that_cannot_hold_the_large_tile_always_take_the_small_one() {
        assert_eq!(
            pick(limits(128, 64 << 10, 8), 4096, 4096, 64),
            "sgemm_tile64_split"
        );
        assert_eq!(
            pick(limits(1024, 16 << 10, 8), 4096, 4096, 64),
            "sgemm_tile64_split"
        );
        assert_eq!(
            pick(limits(256, LARGE_LOCAL_BYTES, 8), 4096, 4096, 64),
            "sgemm_split"
        );
    }

    #[test]
    fn a_forced_tile_wins_and_a_bad_one_is_an_error() {
        let cpu = limits(4096, 4 << 20, 64);
        let large = SgemmChoice::new(cpu, Some(128)).unwrap();
        assert_eq!(large.kernel(1, 1, 1), LARGE);
        let gpu = limits(1024, 48 << 10, 132);
        let small = SgemmChoice::new(gpu, Some(64)).unwrap();
        assert_eq!(small.kernel(4096, 4096, 4096), SMALL);
        for bad in [
            SgemmChoice::new(gpu, Some(96)),
            SgemmChoice::new(limits(1024, 8 << 10, 8), Some(128)),
        ] {
            assert!(matches!(bad, Err(Error::InvalidArgument(_))));
        }
    }
}
