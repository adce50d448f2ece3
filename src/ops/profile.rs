//! Per-kernel device times, for a roofline table where no vendor profiler reaches the backend
//! (Nsight Compute profiles CUDA kernels, not OpenCL ones).

/// The device time of one kernel entry point, summed over its launches since the times were
/// last read ([`crate::Context::kernel_times`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelTime {
    /// The kernel's entry name as launched (`sgemm`, `fill`, a user kernel's entry), or `copy`
    /// for device-side buffer copies.
    pub entry: String,
    /// How many launches completed.
    pub launches: u64,
    /// The sum over those launches of the device's end minus start timestamps
    /// (`CL_PROFILING_COMMAND_END - CL_PROFILING_COMMAND_START`), in nanoseconds: time on the
    /// device, without the queueing before it.
    pub nanos: u64,
}
