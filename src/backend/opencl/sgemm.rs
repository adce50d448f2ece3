//! Which of the OpenCL GEMM kernels a launch uses. On NVIDIA's OpenCL with an sm_80+ GPU, the
//! tensor-core kernels of kernels-cl/gemm_tc.cl (`sgemm_tc128`/`sgemm_tc64`, the CUDA design
//! and its tiles, chosen by [`cl_tensor_core_sgemm`]), or on an H100/H200 the warpgroup kernel
//! of kernels-cl/gemm_wg.cl (`sgemm_wg64`, `sm90a.rs`); `RNN_OPENCL_TENSOR_CORES=0` turns them
//! off. Elsewhere the SIMT kernels of kernels-cl/gemm.cl: `sgemm_split`, the
//! 128 x 128 tile of the CUDA design, or `sgemm_tile64_split`, the 64 x 64 tile. Both split k
//! over the grid's z when the output alone has too few tiles for the device
//! (`backend::gpu::gemm_k_splits`, the rule of the CUDA tensor-core kernels), so a weight gradient
//! (a small output summed over a whole batch) still spreads over every compute unit.
//!
//! Both run 256 work-items. The large tile does four times the work per work-group at a higher
//! rate per compute unit (more than twice the small tile's rate at 4096^3 on an H100 through
//! NVIDIA's OpenCL), but gives four times fewer work-groups. So the large tile is used when
//! its work-groups, k splits included, number at least half the compute units (a crude model:
//! one resident large work-group runs about as fast as two small ones, so below that line the
//! small tile's extra parallelism wins), the small one otherwise, and always on devices that
//! cannot hold the large tile.

use crate::backend::gpu::gemm_k_splits;
use crate::backend::{SGEMM_TC64, SGEMM_TC128, SgemmKernel};
use crate::device::{DeviceInfo, DeviceKind};
use crate::env_switch::Switch;
use crate::error::{Error, Result};

/// The 128 x 128 x 8 kernel, double-buffered, 8 x 8 outputs per work-item.
const LARGE: SgemmKernel = SgemmKernel::new("sgemm_split", (128, 128, 256));

/// The 64 x 64 x 16 kernel, 4 x 4 outputs per work-item.
const SMALL: SgemmKernel = SgemmKernel::new("sgemm_tile64_split", (64, 64, 256));

/// Local memory `sgemm` declares: A and B, two stages of 8 x (128 + 4) floats each.
const LARGE_LOCAL_BYTES: u64 = 2 * 2 * 8 * 132 * 4;

/// `RNN_OPENCL_TENSOR_CORES`: unset, empty, `1`, `on`, `true`, `yes` allow the tensor-core
/// kernels where the device has them; `0`, `off`, `false`, `no` keep every GEMM on the SIMT
/// kernels (the bf16/f16 ones on the portable `hgemm_*`); anything else is an error.
const TENSOR_CORES_VAR: Switch = Switch {
    name: "RNN_OPENCL_TENSOR_CORES",
    unset: true,
    empty: true,
    yes_no: true,
};

/// Whether this process's `RNN_OPENCL_TENSOR_CORES` allows the tensor-core kernels.
pub(super) fn tensor_cores_allowed_by_env() -> Result<bool> {
    TENSOR_CORES_VAR.read_env()
}

/// Whether a device runs kernels-cl/gemm_tc.cl and kernels-cl/hgemm_tc.cl: an NVIDIA GPU on
/// NVIDIA's platform (whose compiler takes inline PTX) of compute capability `cc_major` 8 or more
/// (`mma.sync` on TF32 and bf16/f16, `cp.async`).
pub(super) fn tensor_cores_supported(info: &DeviceInfo, platform: &str, cc_major: u32) -> bool {
    info.kind == DeviceKind::Gpu
        && info.vendor.to_ascii_uppercase().contains("NVIDIA")
        && platform.contains("NVIDIA")
        && cc_major >= 8
}

/// Whether an `m x n x k` product takes the tensor-core kernels where the device has them: both
/// output sides at least 128 and k at least 256. Through NVIDIA's OpenCL they win on W1's
/// products (256-4096 x 512 over k = 784, 512, 256 and 4096) and lose on the recurrent models'
/// thin ones (an output side of 96, or k = 96), which keep the SIMT kernels
/// (docs/performance.md, OpenCL).
pub(crate) fn takes_tensor_cores(m: usize, n: usize, k: usize) -> bool {
    m.min(n) >= 128 && k >= 256
}

/// Groups of `sgemm_tc64` an SM runs at once through NVIDIA's OpenCL (164-168 registers a
/// work-item in the PTX its driver builds, by ptxas 12.9, and 20 KB of local memory: three),
/// which the split-k rule fills: the loads of one group cannot keep an SM busy without
/// cp.async.
const TC64_BLOCKS_PER_SM: u32 = 3;

/// The tensor-core kernel for an `m x n` output on a device with `compute_units` SMs:
/// `sgemm_tc128` only where its tiles fill every SM twice over, else `sgemm_tc64`. Not CUDA's
/// rule ([`crate::backend::tensor_core_sgemm`], three quarters of the SMs): without cp.async an
/// OpenCL k-step waits on its global loads, which the 64 tile hides with three groups an SM
/// against the 128 tile's one (W1's 4096 x 512 products, 128 tiles of 128 on 132 SMs, run
/// faster on 64 tiles).
pub(crate) fn cl_tensor_core_sgemm(compute_units: u32, m: usize, n: usize) -> SgemmKernel {
    let tiles = m.div_ceil(128).saturating_mul(n.div_ceil(128));
    if tiles >= 2 * compute_units as usize {
        SGEMM_TC128
    } else {
        SGEMM_TC64
    }
}

/// The preprocessor line that compiles kernels-cl/gemm_tc.cl and kernels-cl/hgemm_tc.cl into the
/// op set.
pub(super) const TENSOR_CORES_DEFINE: &str = "#define RNN_CL_NV_TC 1\n";

/// What decides whether a device can run the large tile, and how many work-groups fill it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `CL_DEVICE_MAX_WORK_GROUP_SIZE`.
    pub(crate) max_work_group: usize,
    /// `CL_DEVICE_LOCAL_MEM_SIZE` in bytes.
    pub(crate) local_mem: u64,
    /// `CL_DEVICE_MAX_COMPUTE_UNITS`.
    pub(crate) compute_units: u32,
    /// The op set has the tensor-core kernels (kernels-cl/gemm_tc.cl).
    pub(crate) tensor_cores: bool,
}

/// A device's rule for picking the GEMM kernel of a launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SgemmChoice {
    large_fits: bool,
    tensor_cores: bool,
    compute_units: u32,
    forced: Option<SgemmKernel>,
}

impl SgemmChoice {
    /// The rule for a device with `limits`. `forced` (a tile edge, 64 or 128, from
    /// `ContextOptions::opencl_sgemm_tile`) makes every launch use that SIMT kernel, tensor
    /// cores or not; a device that cannot run the large tile refuses to have it forced.
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
            tensor_cores: limits.tensor_cores,
            compute_units: limits.compute_units,
            forced,
        })
    }

    /// The kernel for an `m x n` output summed over `k`; `warpgroup`: the op set has
    /// `sgemm_wg64` (kernels-cl/gemm_wg.cl, compute capability 9.0), which then takes the
    /// products the tensor-core kernels would.
    pub(crate) fn kernel(&self, m: usize, n: usize, k: usize, warpgroup: bool) -> SgemmKernel {
        if let Some(k) = self.forced {
            return k;
        }
        if self.tensor_cores && takes_tensor_cores(m, n, k) {
            if warpgroup {
                return super::sm90a::SGEMM_WG64;
            }
            let kernel = cl_tensor_core_sgemm(self.compute_units, m, n);
            return SgemmKernel {
                // kernels-cl/gemm_tc.cl adds its splits in the launch.
                sums_splits: true,
                blocks_per_sm: if kernel == SGEMM_TC64 {
                    TC64_BLOCKS_PER_SM
                } else {
                    1
                },
                ..kernel
            };
        }
        self.portable(m, n, k)
    }

    /// The SIMT kernel (kernels-cl/gemm.cl) for an `m x n` output summed over `k` where the rule
    /// sends it to the tensor-core kernels ([`SgemmChoice::kernel`]); `None` where it does not
    /// (or a tile is forced). It carries those products while their module is not built
    /// (`OpSet::carried`): NVIDIA's compiler took 24-27 s for it.
    pub(crate) fn portable_for_tensor_cores(
        &self,
        m: usize,
        n: usize,
        k: usize,
    ) -> Option<SgemmKernel> {
        (self.forced.is_none() && self.tensor_cores && takes_tensor_cores(m, n, k))
            .then(|| self.portable(m, n, k))
    }

    /// The SIMT kernel for an `m x n` output summed over `k`.
    fn portable(&self, m: usize, n: usize, k: usize) -> SgemmKernel {
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
            tensor_cores: false,
        }
    }

    /// An H100's limits through NVIDIA's OpenCL, tensor-core kernels in the op set.
    fn h100_with_tensor_cores() -> Limits {
        Limits {
            tensor_cores: true,
            ..limits(1024, 48 << 10, 132)
        }
    }

    fn pick(l: Limits, m: usize, n: usize, k: usize) -> &'static str {
        SgemmChoice::new(l, None)
            .unwrap()
            .kernel(m, n, k, false)
            .entry
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
    fn tensor_cores_take_every_launch_unless_a_tile_is_forced() {
        let h100 = h100_with_tensor_cores();
        assert_eq!(pick(h100, 4096, 4096, 4096), "sgemm_tc128");
        // 264 tiles of 128 fill 132 compute units twice; 263 do not.
        assert_eq!(pick(h100, 128 * 12, 128 * 22, 256), "sgemm_tc128");
        assert_eq!(pick(h100, 128 * 12, 128 * 22 - 1, 256), "sgemm_tc128");
        assert_eq!(pick(h100, 128 * 263, 128, 256), "sgemm_tc64");
        // W1's products.
        assert_eq!(pick(h100, 4096, 512, 784), "sgemm_tc64");
        assert_eq!(pick(h100, 784, 512, 4096), "sgemm_tc64");
        assert_eq!(pick(h100, 256, 512, 256), "sgemm_tc64");
        // A side under 128 or k under 256: the SIMT kernels.
        assert_eq!(pick(h100, 4096, 96, 256), "sgemm_tile64_split");
        assert_eq!(pick(h100, 4096, 1024, 96), "sgemm_split");
        assert_eq!(pick(h100, 96, 256, 4096), "sgemm_tile64_split");
        let choice = SgemmChoice::new(h100, None).unwrap();
        let tc = choice.kernel(256, 512, 784, false);
        assert!(tc.sums_splits);
        assert_eq!(tc.blocks_per_sm, TC64_BLOCKS_PER_SM);
        assert_eq!(choice.kernel(4096, 4096, 4096, false).blocks_per_sm, 1);
        assert_eq!(pick(h100, 256, 512, 784), "sgemm_tc64");
        assert_eq!(pick(h100, 512, 784, 4096), "sgemm_tc64");
        for (tile, entry) in [(64, "sgemm_tile64_split"), (128, "sgemm_split")] {
            let forced = SgemmChoice::new(h100, Some(tile)).unwrap();
            assert_eq!(forced.kernel(4096, 4096, 4096, false).entry, entry);
        }
    }

    #[test]
    fn the_portable_kernels_carry_exactly_the_tensor_core_products() {
        let h100 = h100_with_tensor_cores();
        let choice = SgemmChoice::new(h100, None).unwrap();
        let carrier = |m, n, k| choice.portable_for_tensor_cores(m, n, k).map(|k| k.entry);
        // The example's evaluation products at batch 400, W1's, a large square one: the SIMT
        // kernel the device would take without tensor cores.
        assert_eq!(carrier(400, 256, 784), Some("sgemm_tile64_split"));
        assert_eq!(carrier(400, 128, 256), Some("sgemm_tile64_split"));
        assert_eq!(carrier(4096, 512, 784), Some("sgemm_split"));
        assert_eq!(carrier(4096, 4096, 4096), Some("sgemm_split"));
        let simt = SgemmChoice::new(limits(1024, 48 << 10, 132), None).unwrap();
        for (m, n, k) in [(400, 256, 784), (4096, 512, 784), (4096, 4096, 4096)] {
            assert_eq!(
                choice.portable_for_tensor_cores(m, n, k),
                Some(simt.kernel(m, n, k, false)),
                "{m} x {n} x {k}"
            );
        }
        // Products the tensor-core kernels do not take have nothing to carry.
        assert_eq!(carrier(64, 256, 784), None);
        assert_eq!(carrier(784, 256, 64), None);
        // Nor does a device without them, or a forced tile.
        assert_eq!(simt.portable_for_tensor_cores(4096, 4096, 4096), None);
        let forced = SgemmChoice::new(h100, Some(64)).unwrap();
        assert_eq!(forced.portable_for_tensor_cores(4096, 4096, 4096), None);
    }

    #[test]
    fn the_warpgroup_kernel_takes_the_tensor_core_products_where_the_op_set_has_it() {
        let h100 = h100_with_tensor_cores();
        let choice = SgemmChoice::new(h100, None).unwrap();
        let wg = super::super::sm90a::SGEMM_WG64;
        // W1's products, and a large square one.
        for (m, n, k) in [
            (4096, 512, 784),
            (784, 512, 4096),
            (256, 512, 256),
            (4096, 4096, 4096),
        ] {
            assert_eq!(choice.kernel(m, n, k, true), wg, "{m} x {n} x {k}");
            assert_ne!(choice.kernel(m, n, k, false), wg, "{m} x {n} x {k}");
        }
        // The recurrent models' thin products stay on the SIMT kernels.
        assert_eq!(
            choice.kernel(4096, 96, 256, true).entry,
            "sgemm_tile64_split"
        );
        assert_eq!(
            choice.kernel(96, 256, 4096, true).entry,
            "sgemm_tile64_split"
        );
        // A forced tile, or no tensor cores, wins over the flag.
        let forced = SgemmChoice::new(h100, Some(64)).unwrap();
        assert_eq!(forced.kernel(4096, 512, 784, true), SMALL);
        let simt = SgemmChoice::new(limits(1024, 48 << 10, 132), None).unwrap();
        assert_eq!(simt.kernel(4096, 512, 784, true), LARGE);
    }

    #[test]
    fn tensor_cores_need_an_nvidia_gpu_on_nvidia_opencl_from_sm_80_and_the_variable() {
        let gpu = DeviceInfo {
            id: crate::device::DeviceId::OpenCl {
                platform: 0,
                device: 0,
            },
            backend: crate::device::BackendKind::OpenCl,
            name: "NVIDIA H100 80GB HBM3".into(),
            vendor: "NVIDIA Corporation".into(),
            kind: DeviceKind::Gpu,
            memory: 80 << 30,
            compute_units: 132,
            arch: "OpenCL C 1.2".into(),
            driver: String::new(),
        };
        assert!(tensor_cores_supported(&gpu, "NVIDIA CUDA", 9));
        assert!(!tensor_cores_supported(&gpu, "NVIDIA CUDA", 7));
        assert!(!tensor_cores_supported(
            &gpu,
            "Portable Computing Language",
            9
        ));
        let cpu = DeviceInfo {
            kind: DeviceKind::Cpu,
            vendor: "GenuineIntel".into(),
            ..gpu
        };
        assert!(!tensor_cores_supported(&cpu, "NVIDIA CUDA", 9));
        use std::ffi::OsStr;
        assert!(TENSOR_CORES_VAR.parse(None).unwrap());
        assert!(!TENSOR_CORES_VAR.parse(Some(OsStr::new("0"))).unwrap());
        let err = TENSOR_CORES_VAR
            .parse(Some(OsStr::new("maybe")))
            .unwrap_err();
        assert!(err.to_string().contains("RNN_OPENCL_TENSOR_CORES"), "{err}");
    }

    #[test]
    fn a_forced_tile_wins_and_a_bad_one_is_an_error() {
        let cpu = limits(4096, 4 << 20, 64);
        let large = SgemmChoice::new(cpu, Some(128)).unwrap();
        assert_eq!(large.kernel(1, 1, 1, false), LARGE);
        let gpu = limits(1024, 48 << 10, 132);
        let small = SgemmChoice::new(gpu, Some(64)).unwrap();
        assert_eq!(small.kernel(4096, 4096, 4096, false), SMALL);
        for bad in [
            SgemmChoice::new(gpu, Some(96)),
            SgemmChoice::new(limits(1024, 8 << 10, 8), Some(128)),
        ] {
            assert!(matches!(bad, Err(Error::InvalidArgument(_))));
        }
    }
}
