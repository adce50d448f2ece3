//! The built-in op-set kernel sources of this dialect, embedded at build time.
// SKELETON: replaced by the cuda kernel sources.

/// The complete op-set translation unit for this dialect (see docs/kernel-abi.md).
pub(crate) fn op_set_source() -> String {
    String::new()
}
