//! Kernel sources, user kernels, launch geometry, and the kernel cache shared by every GPU
//! backend (in memory per context, on disk across processes).

use std::fmt;
use std::sync::Arc;

use crate::buffer::View;

/// The source language a GPU backend compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// CUDA C++ compiled by NVRTC.
    Cuda,
    /// OpenCL C compiled by `clBuildProgram`.
    OpenCl,
    /// HIP C++ compiled by hiprtc.
    Hip,
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Cuda => "CUDA C++",
            Dialect::OpenCl => "OpenCL C",
            Dialect::Hip => "HIP C++",
        })
    }
}

/// A kernel to compile at run time: source text in one dialect, its entry point, and compiler
/// options.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelSource {
    /// The dialect of `source`.
    pub dialect: Dialect,
    /// Complete translation unit.
    pub source: String,
    /// Name of the kernel function to launch (`extern "C"` for CUDA/HIP).
    pub entry: String,
    /// Extra compiler options (e.g. `-cl-fast-relaxed-math`, `--use_fast_math`).
    pub options: Vec<String>,
}

impl KernelSource {
    /// A source with no extra options.
    pub fn new(dialect: Dialect, source: impl Into<String>, entry: impl Into<String>) -> Self {
        KernelSource {
            dialect,
            source: source.into(),
            entry: entry.into(),
            options: Vec::new(),
        }
    }

    /// Adds a compiler option.
    pub fn option(mut self, opt: impl Into<String>) -> Self {
        self.options.push(opt.into());
        self
    }
}

/// Grid and block geometry of a launch (CUDA terms; OpenCL's global size is `grid * block` and
/// its local size `block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks (work-groups) in x, y, z.
    pub grid: [u32; 3],
    /// Threads (work-items) per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared (local) memory in bytes; 0 for none.
    ///
    /// CUDA and HIP: the launch's dynamic shared memory, which the kernel declares as
    /// `extern __shared__ float name[];`. OpenCL has no such launch parameter: when this is
    /// non-zero, the backend passes one extra `__local` argument of this many bytes AFTER all
    /// of the launch's arguments (after the `u64` offset of a trailing buffer view), so an
    /// OpenCL kernel that uses it declares a final parameter such as `__local float* scratch`;
    /// one that does not must be launched with 0 here.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `blocks` blocks of `threads` threads.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        LaunchConfig {
            grid: [blocks, 1, 1],
            block: [threads, 1, 1],
            shared_bytes: 0,
        }
    }

    /// Enough 1-D blocks of `threads` threads to cover `n` items (at least one block). A
    /// `threads` of 0 is taken as 1 (a block has at least one thread), and a block count beyond
    /// `u32::MAX` is capped there, so this never panics; a kernel must still bound its indices.
    pub fn for_elements(n: usize, threads: u32) -> Self {
        let threads = threads.max(1);
        let blocks = n.div_ceil(threads as usize).max(1);
        Self::linear(u32::try_from(blocks).unwrap_or(u32::MAX), threads)
    }
}

/// One argument of a user kernel launch.
///
/// A buffer view is passed as TWO kernel parameters: the buffer's base pointer and then the
/// view's offset in elements as a 64-bit unsigned integer (`unsigned long long` in CUDA/HIP,
/// `ulong` in OpenCL). OpenCL cannot offset a `cl_mem`, so every dialect uses this convention,
/// and the built-in kernels do too.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum KernelArg<'a> {
    /// A buffer view: base pointer, then `u64` element offset.
    Buffer(View<'a>),
    /// `float`.
    F32(f32),
    /// `unsigned int` / `uint`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `unsigned long long` / `ulong`.
    U64(u64),
}

/// A compiled user kernel, bound to the context that compiled it.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) context: u64,
    pub(crate) entry: String,
    pub(crate) module: Arc<dyn std::any::Any + Send + Sync>,
}

impl Kernel {
    /// The entry point this kernel launches.
    pub fn entry(&self) -> &str {
        &self.entry
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({} in context {})", self.entry, self.context)
    }
}

/// A family of the built-in op set that compiles on its own: its files (repository path and
/// text, after the dialect's shared headers) and the entry points they define. A table of these
/// per dialect (`backend/{cuda,opencl}/kernels.rs`) says which module holds which kernel; a test
/// holds it against the sources.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpFamily {
    /// The module's name (the family's), in logs and benchmark tables.
    pub name: &'static str,
    /// Its files, in translation-unit order.
    pub files: &'static [(&'static str, &'static str)],
    /// The entry points these files define, in groups (a family's own list, or the lists of
    /// the families a dialect compiles together).
    pub entries: &'static [&'static [&'static str]],
}

/// The entry points of the families that every dialect splits the same way (docs/kernel-abi.md),
/// for the dialects' family tables.
pub(crate) mod family_entries {
    /// Elementwise ops, activations, gathers.
    pub(crate) const ELEMENTWISE: &[&str] = &[
        "fill",
        "scale",
        "axpy",
        "add",
        "mul",
        "bias_act_forward",
        "activation",
        "act_backward",
        "clip_scale",
        "gather_rows",
        "gather_rows_u32",
        "one_hot",
    ];
    /// Softmax, losses, reductions.
    pub(crate) const REDUCE: &[&str] = &[
        "softmax",
        "log_softmax",
        "softmax_xent",
        "mse",
        "sum_cols",
        "sum_partial",
        "sum_final",
        "clip_final",
    ];
    /// The bias-activation backward (a dense layer's bias and pre-activation gradients), on
    /// its own where modules build in parallel: it took as long to compile as the rest of
    /// `reduce`, and a first step needs both.
    pub(crate) const BIAS_GRAD: &[&str] = &["bias_act_backward"];
    /// Its variant with the upstream gradient formed as a product (a thin layer after it), a
    /// module of its own beside [`BIAS_GRAD`] where modules build in parallel.
    pub(crate) const BIAS_GRAD_PRODUCT: &[&str] = &["bias_act_backward_product"];
    /// The f32 one-launch optimizer steps.
    pub(crate) const OPTIM: &[&str] = &["sgd_step", "adam_step"];
    /// The mixed-precision steps: dynamic loss scaling and the optimizers that refresh the
    /// bf16/f16 copy of the parameters.
    pub(crate) const OPTIM_MIXED: &[&str] = &[
        "unscale_check",
        "update_scale",
        "sgd_step_bf16",
        "sgd_step_f16",
        "adam_step_bf16",
        "adam_step_f16",
    ];
    /// Elman, LSTM and GRU steps and cells.
    pub(crate) const RNN_STEP: &[&str] = &[
        "rnn_step_forward",
        "rnn_step_backward",
        "lstm_cell_forward",
        "lstm_cell_backward",
        "gru_cell_forward",
        "gru_cell_backward",
        "gru_cell_forward_bias",
        "gru_cell_backward_carry",
        "lstm_cell_backward_sum",
        "rnn_cell_forward",
        "rnn_cell_backward",
        "lstm_cell_forward_lo",
        "lstm_cell_backward_sum_lo",
        "gru_cell_forward_bias_lo",
        "gru_cell_backward_carry_lo",
        "rnn_cell_forward_lo",
        "rnn_cell_backward_lo",
        "lstm_step_forward",
        "lstm_step_backward",
        "gru_step_forward",
        "gru_step_backward",
    ];
    /// The persistent (one-launch) sequence kernels.
    pub(crate) const SEQUENCE: &[&str] = &[
        "rnn_seq_forward",
        "rnn_seq_forward_regs",
        "rnn_seq_backward",
        "rnn_seq_backward_regs",
        "lstm_seq_forward",
        "lstm_seq_forward_low",
        "lstm_seq_backward",
        "gru_seq_forward",
        "gru_seq_forward_low",
        "gru_seq_backward",
    ];
    /// The block-local Elman sequence kernels for small hidden sizes (plain launches; `_l1`
    /// reads W_hh packed by `bl_pack_w` through the L1 cache, `_local_regs` keeps it in
    /// registers). One module per cell, so that a model waits for its cell's kernels only.
    pub(crate) const SMALL_SEQUENCE_RNN: &[&str] = &[
        "rnn_seq_forward_local",
        "rnn_seq_backward_local",
        "rnn_seq_forward_l1",
        "rnn_seq_backward_l1",
        "rnn_seq_forward_local_regs",
        "rnn_seq_backward_local_regs",
    ];
    /// The same for LSTM.
    pub(crate) const SMALL_SEQUENCE_LSTM: &[&str] = &[
        "lstm_seq_forward_local",
        "lstm_seq_backward_local",
        "lstm_seq_forward_l1",
        "lstm_seq_backward_l1",
    ];
    /// The same for GRU.
    pub(crate) const SMALL_SEQUENCE_GRU: &[&str] = &[
        "gru_seq_forward_local",
        "gru_seq_backward_local",
        "gru_seq_forward_l1",
        "gru_seq_backward_l1",
    ];
    /// The LSTM and GRU block-local sequence kernels with W_hh in registers, each product
    /// split along k: a module of their own, built on first use (only a forced algorithm
    /// launches them; the Elman cell's, taken by default, are in [`SMALL_SEQUENCE_RNN`]).
    pub(crate) const SMALL_SEQUENCE_REGS: &[&str] = &[
        "lstm_seq_forward_local_regs",
        "lstm_seq_backward_local_regs",
        "gru_seq_forward_local_regs",
        "gru_seq_backward_local_regs",
    ];
    /// The paired block-local sequence kernels of every cell (W_hh in shared memory and
    /// through L1; the Elman cell's also in registers): the two directions of a bidirectional
    /// layer in one launch.
    pub(crate) const SMALL_SEQUENCE_PAIR: &[&str] = &[
        "rnn_seq_forward_local_pair",
        "rnn_seq_forward_l1_pair",
        "rnn_seq_forward_local_regs_pair",
        "rnn_seq_backward_local_pair",
        "rnn_seq_backward_l1_pair",
        "rnn_seq_backward_local_regs_pair",
        "lstm_seq_forward_local_pair",
        "lstm_seq_forward_l1_pair",
        "lstm_seq_backward_local_pair",
        "lstm_seq_backward_l1_pair",
        "gru_seq_forward_local_pair",
        "gru_seq_forward_l1_pair",
        "gru_seq_backward_local_pair",
        "gru_seq_backward_l1_pair",
    ];
    /// The kernel that packs W_hh for the block-local `_l1` kernels.
    pub(crate) const SMALL_SEQUENCE_PACK: &[&str] = &["bl_pack_w"];
    /// Dropout and the generator.
    pub(crate) const RANDOM: &[&str] = &["dropout", "rng_advance"];
    /// Layer normalization.
    pub(crate) const NORM: &[&str] = &["layer_norm_forward", "layer_norm_backward"];
    /// bf16/f16 GEMM with f32 accumulation (f32 or T output, the dense epilogues) and the
    /// column sums of a T matrix into f32.
    pub(crate) const HALF_GEMM: &[&str] = &[
        "hgemm_bf16",
        "hgemm_f16",
        "hgemm_lo_bf16",
        "hgemm_lo_f16",
        "hcol_sum_bf16",
        "hcol_sum_f16",
    ];
    /// The bf16/f16 GEMMs on tensor cores (CUDA sm_80+, NVIDIA's OpenCL on sm_80+): the
    /// `hgemm_*` and `hgemm_lo_*` contracts in 128- and 64-wide tiles.
    pub(crate) const HALF_GEMM_TC: &[&str] = &[
        "hgemm_tc128_bf16",
        "hgemm_tc128_f16",
        "hgemm_tc64_bf16",
        "hgemm_tc64_f16",
        "hgemm_lo_tc128_bf16",
        "hgemm_lo_tc128_f16",
        "hgemm_lo_tc64_bf16",
        "hgemm_lo_tc64_f16",
    ];
    /// The tier-0 stand-ins (`kernels-{cu,cl}/tier0.*`, the module [`super::TIER0`]).
    pub(crate) const TIER0: &[&str] = &["sgemm_tier0"];
    /// Embedding gradients.
    pub(crate) const EMBEDDING: &[&str] = &["scatter_add_rows"];
    /// Variable-length sequences: the lengths' layout, row masks, loss weights.
    pub(crate) const VARLEN: &[&str] = &[
        "length_layout",
        "scale_rows",
        "loss_weights",
        "loss_weights_labels",
    ];
    /// The kernels of the 16-bit float types (kernels-{cu,cl}/mixed.*).
    pub(crate) const MIXED: &[&str] = &[
        "cast_f32_bf16",
        "cast_f32_f16",
        "cast_bf16_f32",
        "cast_f16_f32",
        "cast_bf16_f16",
        "cast_f16_bf16",
        "scale_bf16",
        "scale_f16",
        "axpy_bf16",
        "axpy_f16",
        "add_bf16",
        "add_f16",
        "mul_bf16",
        "mul_f16",
        "activation_bf16",
        "activation_f16",
        "act_backward_bf16",
        "act_backward_f16",
        "bias_act_forward_bf16",
        "bias_act_forward_f16",
    ];
}

/// The name of the tier-0 family: quick-to-compile stand-ins that a cold start launches until
/// the families they stand in for are built (`src/backend/gpu/modules.rs`).
pub(crate) const TIER0: &str = "tier0";

/// The kernels of a dense training step (and of gradient clipping) that the tier-0 module also
/// holds, compiled from their families' own files (`#ifndef RNN_TIER0_COPIES` leaves out the
/// rest), so that a cold start's first steps wait for one small module rather than for
/// `elementwise`, `reduce` and `optim` (src/backend/gpu/tier0.rs).
pub(crate) const TIER0_COPIES: &[&str] = &[
    "fill",
    "gather_rows",
    "gather_rows_u32",
    "bias_act_forward",
    "clip_scale",
    "softmax_xent",
    "bias_act_backward",
    "bias_act_backward_product",
    "sum_partial",
    "clip_final",
    "sgd_step",
    "adam_step",
];

/// Appends the copies ([`TIER0_COPIES`]) to the tier-0 module of `modules`: `files`, the
/// dialect's files of the families they come from, after the define that keeps only them.
pub(crate) fn add_tier0_copies(modules: &mut [OpModule], files: &[(&str, &str)]) {
    if let Some(tier0) = modules.iter_mut().find(|m| m.name == TIER0) {
        tier0.source.push_str("#define RNN_TIER0_COPIES 1\n");
        tier0.source.push_str(&concatenate(files));
    }
}

/// One module of the built-in op set as a device compiles it: the families are compiled, cached
/// and loaded independently, each on the first launch of one of its kernels.
#[derive(Debug, Clone)]
pub struct OpModule {
    /// The family's name (`elementwise`, `gemm_tc`, ...).
    pub name: &'static str,
    /// The entry points the module defines; `None`: every built-in entry (a device that builds
    /// its op set as one module).
    pub entries: Option<Vec<&'static str>>,
    /// The complete translation unit: the dialect's shared headers, then the family's files.
    pub source: String,
}

impl OpFamily {
    /// This family's module: `prelude` (defines and shared headers), then its files, each after
    /// a `// ---- path` line so that compiler messages can be traced to a file.
    pub(crate) fn module(&self, prelude: &str) -> OpModule {
        let mut source = String::from(prelude);
        source.push_str(&concatenate(self.files));
        OpModule {
            name: self.name,
            entries: Some(self.entries.concat()),
            source,
        }
    }
}

/// A dialect's whole op set as one translation unit: `headers`, then every family's files (what
/// the compile tests and the kernel contract read).
pub(crate) fn whole_op_set(headers: &[(&str, &str)], families: &[OpFamily]) -> String {
    let mut out = concatenate(headers);
    for family in families {
        out.push_str(&concatenate(family.files));
    }
    out
}

/// `files` concatenated, each after a `// ---- path` line: a dialect's shared headers.
pub(crate) fn concatenate(files: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (path, text) in files {
        out.push_str("// ---- ");
        out.push_str(path);
        out.push_str(" ----\n");
        out.push_str(text);
        out.push('\n');
    }
    out
}
