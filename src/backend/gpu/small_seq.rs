//! The block-local sequence kernels (`*_seq_*_local`, geometry `B`, kernels-cu/small_seq.cu,
//! kernels-cl/small_seq.cl): each block owns a tile of batch rows and every hidden unit, keeps
//! the whole W_hh and its state rows in shared memory, and steps with `__syncthreads` only, in
//! one plain launch per sequence op. The persistent kernels (geometry `Q`) split the hidden
//! units across blocks and meet at a global-memory barrier every step, which costs about the
//! same however little a step computes (3-7 us a step on an H100, 2026-11-26, issue 27),
//! so it dominates at small hidden sizes; these kernels have no such barrier, and run on every
//! device whose blocks hold W_hh (no co-residency needed).
//!
//! Selection (`RNN_RECURRENT_BLOCK_LOCAL`, `ContextOptions::recurrent_block_local`): by default
//! a sequence runs block-local wherever W_hh and one tile fit a block's shared memory, at any
//! batch (on an H100 under CUDA: LSTM hidden <= 119, GRU <= 136, Elman <= 240 at one row a
//! block; with 48 KB, OpenCL on NVIDIA and HIP: LSTM <= 52, GRU <= 62, Elman <= 108). There a
//! row's whole recurrence stays in one block and a step costs its products, not a barrier;
//! larger hidden sizes do not fit, so the rule needs no size threshold. `0` turns them off (the
//! persistent, GEMM or step paths decide as before).
//!
//! The L1 variant (`*_seq_*_l1`; kernels-cl/small_seq.cl and kernels-cu/small_seq.cu compile
//! each body twice) reads W_hh from global memory, packed once per sequence op by `bl_pack_w`
//! in the layout the shared-memory variant gives it, so that a warp's loads are contiguous, and
//! keeps only the staged rows and products in local memory. On NVIDIA GPUs the L1 cache and
//! shared memory are one array per SM (256 KB on an H100), so a W_hh of up to
//! [`L1_BUDGET_NVIDIA`] read every step may stay in L1 without a grid barrier. Under OpenCL and
//! HIP (48 KB a block) it is chosen where the shared-memory variant does not fit and W_hh
//! (padded) is at most [`GpuOps::l1_budget`]; never by default under CUDA, whose blocks hold
//! W_hh at those sizes. The budget is a rule of thumb to be confirmed by the all-algorithms grid
//! (benches/recurrent_grid.rs `--algos all`).
//!
//! The register variant (`*_seq_*_local_regs`, [`WPlace::Registers`]) holds W_hh in the
//! threads' registers, each product split along k; the router takes it first for the Elman
//! cell wherever it fits ([`GpuOps::registers_wanted`]). Each kernel also has a paired entry
//! (`*_pair`, [`GpuOps::pair_plan`], [`GpuOps::block_local_pair`]) that runs two sequences of
//! one shape, a bidirectional layer's directions, in one launch (src/backend/gpu/seq_pair.rs).

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::kernel::{Dialect, LaunchConfig};
use crate::ops::SeqShape;

/// `RNN_RECURRENT_BLOCK_LOCAL`: off (`0`, `off`, `false`, `no`) keeps every recurrent sequence
/// off the block-local kernels; on, unset or empty, they take what fits (the module docs).
const ENV: Switch = Switch {
    name: "RNN_RECURRENT_BLOCK_LOCAL",
    unset: true,
    empty: true,
    yes_no: true,
};

/// The context's choice (`ContextOptions::recurrent_block_local`), else [`ENV`]'s. Read once,
/// when the context is created.
pub(crate) fn choice(option: Option<bool>) -> Result<bool> {
    match option {
        Some(on) => Ok(on),
        None => ENV.read_env(),
    }
}

/// The most threads of a block (`__launch_bounds__(1024)` in kernels-cu/small_seq.cu).
const MAX_THREADS: usize = 1024;

/// The largest shared memory a block of any current GPU may have (an H100's 227 KB): W_hh
/// alone beyond it rules a kernel out before the device is asked (and its module compiled).
const MAX_SHARED_BYTES: usize = 227 << 10;

/// The most bytes of packed W_hh the automatic choice reads through the L1 cache on an NVIDIA
/// GPU: L1 and shared memory are one array per SM (128 KB on a V100, 192 KB on an A100, 256 KB
/// on an H100), and the L1 variant asks for only a few KB of local memory, so the rest is L1
/// (covers LSTM hidden 109, GRU 128, Elman 220). NVIDIA's OpenCL reports no per-SM cache size
/// (its `CL_DEVICE_GLOBAL_MEM_CACHE_SIZE` is a sum over SMs), hence a constant.
pub(crate) const L1_BUDGET_NVIDIA: usize = 192 << 10;
/// The same elsewhere (L1 caches of 16-64 KB per compute unit, backed by L2): W_hh read every
/// step from there still saves the per-step launches of the fallback at small sizes.
pub(crate) const L1_BUDGET_OTHER: usize = 64 << 10;

/// Where a block-local kernel keeps W_hh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WPlace {
    /// In the block's shared (local) memory (`*_local`).
    Shared,
    /// In global memory, packed, read through the L1 cache (`*_l1`).
    L1,
    /// In registers, each product split along k over [`k_split`] threads (`*_local_regs`).
    Registers,
}

/// Float4s of W_hh a thread of a `*_local_regs` kernel holds (`BL_REG_CHUNKS` of
/// kernels-cu/small_seq.cu and kernels-cl/small_seq.cl).
const REG_CHUNKS: usize = 6;

/// The threads of one product (`bl_ksplit` of the kernels): with W_hh in registers, as many as
/// hold a row of `hidden` (padded to 4) in [`REG_CHUNKS`] float4s each; else 1.
fn k_split(place: WPlace, hidden: usize) -> usize {
    match place {
        WPlace::Registers => hidden.div_ceil(4).div_ceil(REG_CHUNKS),
        WPlace::Shared | WPlace::L1 => 1,
    }
}

/// The floats of W_hh packed as the products' operand: `gates hidden` by hidden rounded up to 4.
fn packed_floats(gates: usize, hidden: usize) -> usize {
    gates
        .saturating_mul(hidden)
        .saturating_mul(hidden.div_ceil(4) * 4)
}

/// A block-local launch: `grid` blocks of `threads` threads with `shared_floats` floats of
/// dynamic shared memory each, `rows` batch rows a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockLocal {
    pub grid: usize,
    pub rows: usize,
    pub threads: usize,
    pub shared_floats: usize,
}

/// What a device gives one block: threads and bytes of dynamic shared memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockRoom {
    pub threads: usize,
    pub shared_bytes: usize,
}

/// The launch of a block-local kernel with `gates` gate blocks (1 Elman, 3 GRU, 4 LSTM) over
/// `batch x hidden`, forward or backward, with W_hh in `place`, on a device with
/// `compute_units` SMs whose blocks have `room`: the fewest rows a block that still give every
/// SM one block (more rows per block only lengthen each block's steps while SMs idle), fewer
/// where the threads (one per product and row group, and at least one per cell element of the
/// tile) or the shared memory (W_hh where it is kept there, the staged rows with hidden padded
/// to 4, the products) would not fit. `None` where not even one row fits.
pub(crate) fn geometry(
    gates: usize,
    (batch, hidden): (usize, usize),
    (forward, place): (bool, WPlace),
    compute_units: usize,
    room: BlockRoom,
) -> Option<BlockLocal> {
    let max_threads = room.threads.min(MAX_THREADS);
    if batch == 0 || hidden == 0 || hidden > max_threads {
        return None;
    }
    let gh = gates.checked_mul(hidden)?;
    let ks = k_split(place, hidden);
    let padded = gh.checked_mul(ks)?.div_ceil(32).checked_mul(32)?;
    let max_groups = max_threads / padded;
    if max_groups == 0 {
        return None;
    }
    // k runs in float4s: each gate block's hidden padded to 4, in W and in the staged rows.
    let padded_hidden = hidden.div_ceil(4) * 4;
    let width = if forward { 1 } else { gates } * padded_hidden;
    let w = match place {
        WPlace::Shared => gh.checked_mul(padded_hidden)?,
        WPlace::L1 | WPlace::Registers => 0,
    };
    // The partial products of a split product, after the products.
    let partials = if ks > 1 { gh.checked_mul(ks)? } else { 0 };
    let want = batch
        .div_ceil(compute_units.max(1))
        .min(max_threads / hidden);
    (1..=want.max(1)).rev().find_map(|rows| {
        let groups = rows.min(max_groups);
        let threads = padded * groups;
        let slots = groups * rows.div_ceil(groups);
        let floats = w.checked_add(slots * (width + gh + partials))?;
        let fits = rows * hidden <= threads && floats.checked_mul(4)? <= room.shared_bytes;
        fits.then_some(BlockLocal {
            grid: batch.div_ceil(rows),
            rows,
            threads,
            shared_floats: floats,
        })
    })
}

/// The block-local entries of each persistent kernel, W_hh in shared memory, through L1 and
/// in registers.
const RNN_FORWARD: [&str; 3] = [
    "rnn_seq_forward_local",
    "rnn_seq_forward_l1",
    "rnn_seq_forward_local_regs",
];
const RNN_BACKWARD: [&str; 3] = [
    "rnn_seq_backward_local",
    "rnn_seq_backward_l1",
    "rnn_seq_backward_local_regs",
];
const LSTM_FORWARD: [&str; 3] = [
    "lstm_seq_forward_local",
    "lstm_seq_forward_l1",
    "lstm_seq_forward_local_regs",
];
const LSTM_BACKWARD: [&str; 3] = [
    "lstm_seq_backward_local",
    "lstm_seq_backward_l1",
    "lstm_seq_backward_local_regs",
];
const GRU_FORWARD: [&str; 3] = [
    "gru_seq_forward_local",
    "gru_seq_forward_l1",
    "gru_seq_forward_local_regs",
];
const GRU_BACKWARD: [&str; 3] = [
    "gru_seq_backward_local",
    "gru_seq_backward_l1",
    "gru_seq_backward_local_regs",
];

/// The paired entries (`*_PAIR` of kernels-cu/small_seq.cu; two sequences in one launch) of
/// each persistent kernel, W_hh in shared memory, through L1 and in registers (the Elman cell
/// only: the router keeps the others' W_hh in registers only when forced).
const PAIRS: [(&str, [Option<&str>; 3]); 6] = [
    (
        "rnn_seq_forward",
        [
            Some("rnn_seq_forward_local_pair"),
            Some("rnn_seq_forward_l1_pair"),
            Some("rnn_seq_forward_local_regs_pair"),
        ],
    ),
    (
        "rnn_seq_backward",
        [
            Some("rnn_seq_backward_local_pair"),
            Some("rnn_seq_backward_l1_pair"),
            Some("rnn_seq_backward_local_regs_pair"),
        ],
    ),
    (
        "lstm_seq_forward",
        [
            Some("lstm_seq_forward_local_pair"),
            Some("lstm_seq_forward_l1_pair"),
            None,
        ],
    ),
    (
        "lstm_seq_backward",
        [
            Some("lstm_seq_backward_local_pair"),
            Some("lstm_seq_backward_l1_pair"),
            None,
        ],
    ),
    (
        "gru_seq_forward",
        [
            Some("gru_seq_forward_local_pair"),
            Some("gru_seq_forward_l1_pair"),
            None,
        ],
    ),
    (
        "gru_seq_backward",
        [
            Some("gru_seq_backward_local_pair"),
            Some("gru_seq_backward_l1_pair"),
            None,
        ],
    ),
];

/// A block-local kernel: its entry, gate blocks (1 Elman, 3 GRU, 4 LSTM), direction, where it
/// keeps W_hh, the position of `w_hh` among its buffers, and its paired entry, if any.
#[derive(Debug, Clone, Copy)]
pub(super) struct LocalKernel {
    pub entry: &'static str,
    pub gates: usize,
    pub forward: bool,
    pub place: WPlace,
    w_arg: usize,
    pair: Option<&'static str>,
}

impl LocalKernel {
    /// The block-local counterpart of the persistent kernel `persistent` (`lstm_seq_forward`,
    /// ...; same arguments less the barrier and exchange buffers) with W_hh in `place`.
    pub(super) fn of(persistent: &str, place: WPlace) -> Option<LocalKernel> {
        let pick = |[local, l1, regs]: [&'static str; 3]| match place {
            WPlace::Shared => local,
            WPlace::L1 => l1,
            WPlace::Registers => regs,
        };
        let (entries, gates, w_arg) = match persistent {
            "rnn_seq_forward" => (RNN_FORWARD, 1, 2),
            "rnn_seq_backward" => (RNN_BACKWARD, 1, 2),
            "lstm_seq_forward" => (LSTM_FORWARD, 4, 3),
            "lstm_seq_backward" => (LSTM_BACKWARD, 4, 3),
            "gru_seq_forward" => (GRU_FORWARD, 3, 2),
            "gru_seq_backward" => (GRU_BACKWARD, 3, 3),
            _ => return None,
        };
        let entry = pick(entries);
        let pairs = PAIRS
            .iter()
            .find(|(p, _)| *p == persistent)
            .map(|(_, e)| *e);
        let pair = pairs.and_then(|[local, l1, regs]| match place {
            WPlace::Shared => local,
            WPlace::L1 => l1,
            WPlace::Registers => regs,
        });
        Some(LocalKernel {
            entry,
            gates,
            forward: persistent.ends_with("_forward"),
            place,
            w_arg,
            pair,
        })
    }
}

/// A block-local launch that fits the device: the kernel and its geometry.
#[derive(Debug, Clone, Copy)]
pub(super) struct LocalPlan {
    pub kernel: LocalKernel,
    pub launch: BlockLocal,
}

impl<D: Device> GpuOps<D> {
    /// The most bytes of packed W_hh that the automatic choice reads through the L1 cache
    /// ([`L1_BUDGET_NVIDIA`] on NVIDIA GPUs, else [`L1_BUDGET_OTHER`]).
    pub(super) fn l1_budget(&self) -> usize {
        if self.info.vendor.to_ascii_uppercase().contains("NVIDIA") {
            L1_BUDGET_NVIDIA
        } else {
            L1_BUDGET_OTHER
        }
    }

    /// Whether the automatic choice keeps W_hh of a `gates`-gate cell at `hidden` in
    /// registers: the Elman cell, where its threads (`hidden x ks`) fit a block. Timed against
    /// the shared-memory kernels on an H100 (`recurrent_grid --algos`, 2026-12-08, training
    /// step): CUDA Elman h64 b64 t128 301 -> 230 us, h128 440 -> 343, h64 b16 t32 2-layer bi
    /// 449 -> 303; NVIDIA OpenCL h64 b16 2-layer bi 718 -> 600. The LSTM lost (h64 b64 398 ->
    /// 418) and the GRU gained little (h64 399 -> 376), so both keep shared memory. Checked
    /// before any plan, so that the LSTM and GRU never build their register module (a
    /// first-use family) for the question.
    pub(super) fn registers_wanted(&self, gates: usize, hidden: usize) -> bool {
        gates == 1
            && gates
                .saturating_mul(hidden)
                .saturating_mul(k_split(WPlace::Registers, hidden))
                <= MAX_THREADS
    }

    /// Whether the automatic choice may read W_hh of a `gates`-gate cell at `hidden` through
    /// the L1 cache: OpenCL and HIP (48 KB of shared memory a block), where W_hh is within
    /// [`GpuOps::l1_budget`]. Never CUDA, whose blocks hold W_hh up to the sizes the budget
    /// allows on an H100 (its `_l1` entries are there for the forced switch).
    pub(super) fn l1_wanted(&self, gates: usize, hidden: usize) -> bool {
        matches!(self.device.dialect(), Dialect::OpenCl | Dialect::Hip)
            && packed_floats(gates, hidden).saturating_mul(4) <= self.l1_budget()
    }

    /// The block-local launch of the counterpart of the persistent kernel `persistent` for
    /// `shape` with W_hh in `place`, or why there is none on this device.
    pub(super) fn local_plan(
        &self,
        persistent: &str,
        shape: SeqShape,
        place: WPlace,
    ) -> Result<std::result::Result<LocalPlan, &'static str>> {
        let Some(k) = LocalKernel::of(persistent, place) else {
            return Ok(Err("no block-local kernel of this op"));
        };
        let w_bytes = packed_floats(k.gates, shape.hidden).saturating_mul(4);
        if place == WPlace::Shared && w_bytes > MAX_SHARED_BYTES {
            return Ok(Err("W_hh exceeds the shared memory of any block"));
        }
        self.plan_on(k, shape, self.info.compute_units as usize)
    }

    /// The launch of `k` for `shape` as if the device had `units` SMs, in `k.entry`'s block
    /// limits, or why none fits.
    fn plan_on(
        &self,
        k: LocalKernel,
        shape: SeqShape,
        units: usize,
    ) -> Result<std::result::Result<LocalPlan, &'static str>> {
        let module = self.module_for(k.entry)?;
        let Some(limits) = self.device.block_limits(&module, k.entry).transpose()? else {
            return Ok(Err("the device does not report its block limits"));
        };
        let room = BlockRoom {
            threads: limits.0 as usize,
            shared_bytes: limits.1 as usize,
        };
        let dims = (shape.batch, shape.hidden);
        Ok(geometry(k.gates, dims, (k.forward, k.place), units, room)
            .map(|launch| LocalPlan { kernel: k, launch })
            .ok_or("one row and its products (and W_hh, if kept there) do not fit a block"))
    }

    /// The paired launch of `plan`'s kernel (its `_pair` entry, two sequences of `shape`, one
    /// along each `y` of the grid): each sequence's geometry as over half the SMs, so that the
    /// two together still give every SM one block. `None` where the kernel has no paired
    /// entry (W_hh in registers) or its limits fit no row.
    pub(super) fn pair_plan(&self, plan: &LocalPlan, shape: SeqShape) -> Result<Option<LocalPlan>> {
        let Some(entry) = plan.kernel.pair else {
            return Ok(None);
        };
        let k = LocalKernel {
            entry,
            pair: None,
            ..plan.kernel
        };
        let units = (self.info.compute_units as usize).div_ceil(2);
        // The two sequences can always run as two launches: a paired module that does not
        // build, or whose limits the device does not report, costs the pairing only.
        match self.plan_on(k, shape, units) {
            Ok(plan) => Ok(plan.ok()),
            Err(e) => {
                log::warn!(
                    "{}: {entry} unavailable ({e}); two launches instead",
                    self.info.id
                );
                Ok(None)
            }
        }
    }

    /// One launch of the block-local `plan` over every step of `shape` with `bufs` (those of
    /// the persistent kernel), then the dimensions and what `tail` appends (the Elman
    /// activation). The L1 variant first packs W_hh into this context's packed-W scratch
    /// (grow-only like the carry), which then takes the place of `w_hh`.
    pub(super) fn block_local(
        &self,
        plan: &LocalPlan,
        bufs: &[&View<'_>],
        shape: SeqShape,
        tail: impl FnOnce(Args) -> Args,
    ) -> Result<()> {
        let k = plan.kernel;
        if k.place != WPlace::L1 {
            return self.launch_local(plan, bufs, shape, 1, tail);
        }
        let n = packed_floats(k.gates, shape.hidden);
        self.with_grow_only(&self.seq_packed_w, n, false, |packed| {
            self.pack_w(k, bufs[k.w_arg], &packed, shape.hidden)?;
            let mut swapped = bufs.to_vec();
            swapped[k.w_arg] = &packed;
            self.launch_local(plan, &swapped, shape, 1, tail)
        })
    }

    /// One launch of the paired `plan` ([`GpuOps::pair_plan`]) over two sequences of `shape`,
    /// `first` (`y = 0`) and `second` (`y = 1`) the buffers of each, as [`GpuOps::block_local`]
    /// takes them; the L1 variant packs both W_hh, side by side in the packed-W scratch.
    pub(super) fn block_local_pair(
        &self,
        plan: &LocalPlan,
        (first, second): (&[&View<'_>], &[&View<'_>]),
        shape: SeqShape,
        tail: impl FnOnce(Args) -> Args,
    ) -> Result<()> {
        let k = plan.kernel;
        if k.place != WPlace::L1 {
            let both: Vec<&View<'_>> = first.iter().chain(second).copied().collect();
            return self.launch_local(plan, &both, shape, 2, tail);
        }
        let n = packed_floats(k.gates, shape.hidden);
        let both_n = n.checked_mul(2).ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "{}: two packed W_hh of {n} floats overflow",
                self.info.id
            ))
        })?;
        self.with_grow_only(&self.seq_packed_w, both_n, false, |packed| {
            let (p0, p1) = (packed.slice(0, n)?, packed.slice(n, n)?);
            self.pack_w(k, first[k.w_arg], &p0, shape.hidden)?;
            self.pack_w(k, second[k.w_arg], &p1, shape.hidden)?;
            let (mut a, mut b) = (first.to_vec(), second.to_vec());
            a[k.w_arg] = &p0;
            b[k.w_arg] = &p1;
            let both: Vec<&View<'_>> = a.iter().chain(&b).copied().collect();
            self.launch_local(plan, &both, shape, 2, tail)
        })
    }

    /// `bl_pack_w`: W_hh `w` of `k`'s cell at `hidden` into `packed`, in the layout the
    /// shared-memory variant gives it.
    fn pack_w(&self, k: LocalKernel, w: &View<'_>, packed: &View<'_>, hidden: usize) -> Result<()> {
        let n = packed_floats(k.gates, hidden);
        let pack = Args::new()
            .bufs(&[w, packed])?
            .dims(&[k.gates, hidden])
            .u32(k.forward as u32);
        self.run("bl_pack_w", launch::elementwise(n), pack)
    }

    /// The launch of `plan` with `bufs` as they are, `sequences` (1, or 2 paired) along `y`.
    fn launch_local(
        &self,
        plan: &LocalPlan,
        bufs: &[&View<'_>],
        shape: SeqShape,
        sequences: u32,
        tail: impl FnOnce(Args) -> Args,
    ) -> Result<()> {
        let (k, launch) = (plan.kernel, plan.launch);
        let module = self.module_for(k.entry)?;
        let dims = [shape.steps, shape.batch, shape.hidden];
        let args = tail(Args::new().bufs(bufs)?.dims(&dims));
        let config = LaunchConfig {
            grid: [launch.grid as u32, sequences, 1],
            block: [launch.threads as u32, 1, 1],
            // Fits u32: at most the device's shared bytes a block.
            shared_bytes: (launch.shared_floats * 4) as u32,
        };
        self.count_recorded();
        self.device
            .launch(&module, k.entry, &config, args.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::{BlockLocal, BlockRoom, L1_BUDGET_NVIDIA, WPlace, geometry, packed_floats};

    const H100: BlockRoom = BlockRoom {
        threads: 1024,
        shared_bytes: 227 << 10,
    };
    const NV_OPENCL: BlockRoom = BlockRoom {
        threads: 1024,
        shared_bytes: 48 << 10,
    };

    /// The largest hidden size whose forward and backward both fit at batch 1 with W_hh in
    /// `place`.
    fn largest_in(place: WPlace, gates: usize, limit: BlockRoom) -> usize {
        (1..=1024)
            .filter(|&h| {
                geometry(gates, (1, h), (true, place), 132, limit).is_some()
                    && geometry(gates, (1, h), (false, place), 132, limit).is_some()
            })
            .max()
            .unwrap_or(0)
    }

    fn largest(gates: usize, limit: BlockRoom) -> usize {
        largest_in(WPlace::Shared, gates, limit)
    }

    #[test]
    fn hidden_limits_by_cell_and_device() {
        assert_eq!([4, 3, 1].map(|g| largest(g, H100)), [119, 136, 240]);
        assert_eq!([4, 3, 1].map(|g| largest(g, NV_OPENCL)), [52, 62, 108]);
    }

    #[test]
    fn the_l1_variant_is_bounded_by_threads_and_the_budget_by_w() {
        // Without W_hh in local memory only the products' threads bound the hidden size.
        let l1 = [4, 3, 1].map(|g| largest_in(WPlace::L1, g, NV_OPENCL));
        assert_eq!(l1, [256, 341, 1024]);
        // W_hh within the NVIDIA budget: LSTM <= 109, GRU <= 128, Elman <= 220.
        let within = |g: usize| {
            (1..=1024)
                .filter(|&h| packed_floats(g, h) * 4 <= L1_BUDGET_NVIDIA)
                .max()
                .unwrap()
        };
        assert_eq!([4, 3, 1].map(within), [109, 128, 220]);
        // GRU hidden 128, batch 64: one row a block, 384 threads, rows and products only.
        let gru = geometry(3, (64, 128), (false, WPlace::L1), 132, NV_OPENCL).unwrap();
        assert_eq!((gru.grid, gru.rows, gru.threads), (64, 1, 384));
        assert_eq!(gru.shared_floats, 3 * 128 + 384);
    }

    #[test]
    fn the_register_variant_is_bounded_by_its_split_products_threads() {
        // G hidden ks <= 1024 threads, ks = ceil(ceil(hidden / 4) / 6); the device's shared
        // memory does not bind.
        for room in [H100, NV_OPENCL] {
            let regs = [4, 3, 1].map(|g| largest_in(WPlace::Registers, g, room));
            assert_eq!(regs, [72, 85, 146]);
        }
        // Elman hidden 128, batch 64: one row a block, 128 products split 6 ways, the staged
        // row, the products and their partial sums.
        let elman = geometry(1, (64, 128), (true, WPlace::Registers), 132, NV_OPENCL).unwrap();
        assert_eq!((elman.grid, elman.rows, elman.threads), (64, 1, 768));
        assert_eq!(elman.shared_floats, 128 + 128 + 768);
        // Up to 24 floats a row fit one thread: no split, no partial sums.
        let small = geometry(4, (8, 24), (false, WPlace::Registers), 132, H100).unwrap();
        assert_eq!(small.threads, 96);
        assert_eq!((small.grid, small.shared_floats), (8, 4 * 24 + 96));
    }

    #[test]
    fn one_row_a_block_until_the_batch_exceeds_the_sms() {
        // LSTM hidden 64 forward: 256 products, one thread each.
        let one = geometry(4, (64, 64), (true, WPlace::Shared), 132, H100).unwrap();
        assert_eq!(
            one,
            BlockLocal {
                grid: 64,
                rows: 1,
                threads: 256,
                shared_floats: 4 * 64 * 64 + 64 + 256,
            }
        );
        // Batch 256 on 132 SMs: two rows a block, a row group each.
        let two = geometry(4, (256, 64), (true, WPlace::Shared), 132, H100).unwrap();
        assert_eq!((two.grid, two.rows, two.threads), (128, 2, 512));
        // Batch 4096: 32 rows wanted; the cell threads (rows x hidden <= threads) allow 16.
        let many = geometry(4, (4096, 64), (false, WPlace::Shared), 132, H100).unwrap();
        assert_eq!((many.grid, many.rows, many.threads), (256, 16, 1024));
        assert!(many.shared_floats * 4 <= H100.shared_bytes);
    }

    #[test]
    fn nothing_fits_without_room_for_w() {
        assert_eq!(
            geometry(4, (8, 128), (true, WPlace::Shared), 132, H100),
            None
        );
        assert_eq!(
            geometry(1, (8, 2000), (true, WPlace::Shared), 132, H100),
            None
        );
        assert_eq!(
            geometry(4, (0, 16), (true, WPlace::Shared), 132, H100),
            None
        );
        let none = BlockRoom {
            threads: 1024,
            shared_bytes: 0,
        };
        assert_eq!(
            geometry(4, (1, 16), (true, WPlace::Shared), 132, none),
            None
        );
        // More than 1024 products a row: no block has the threads.
        let unbounded = BlockRoom {
            threads: 1 << 20,
            shared_bytes: usize::MAX,
        };
        assert_eq!(
            geometry(4, (1, 300), (true, WPlace::Shared), 132, unbounded),
            None
        );
        // A kernel limited to 128 work-items (registers) cannot take 256 products.
        let small = BlockRoom {
            threads: 128,
            shared_bytes: 48 << 10,
        };
        assert_eq!(
            geometry(4, (1, 64), (true, WPlace::Shared), 132, small),
            None
        );
        assert!(geometry(4, (1, 32), (true, WPlace::Shared), 132, small).is_some());
    }
}
