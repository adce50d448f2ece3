//! Host memory that a device copies from asynchronously ([`HostBlock`]): pinned memory on
//! CUDA, a mapped host-allocated buffer on OpenCL, plain memory elsewhere. A data stream's
//! reading threads write each batch straight into one, and the training thread only queues
//! its copy ([`super::Execution::upload_block_on_side`]).

use std::any::Any;

use crate::error::Result;

/// A block of host memory a device copies from without staging it first; reused batch after
/// batch. Dropping a block waits for the copies still reading it.
#[doc(hidden)]
pub trait HostBlock: Send {
    /// The block's bytes for writing, once every copy queued from it has finished (this waits
    /// for them). On CUDA the memory is write-combined: reading it back is slow.
    fn bytes_mut(&mut self) -> Result<&mut [u8]>;

    /// The block's length in bytes.
    fn len(&self) -> usize;

    /// True for a block of no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backend's own type, for the device that copies from it.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<'a> dyn HostBlock + 'a {
    /// This block as the backend's own type `T`, else an error for `op` (a block of another
    /// backend or device kind). Only the backends with their own blocks (CUDA's pinned, OpenCL's
    /// mapped) ask.
    #[cfg(any(feature = "cuda", feature = "opencl"))]
    pub(crate) fn downcast<T: HostBlock + 'static>(&mut self, op: &str) -> Result<&mut T> {
        self.as_any_mut().downcast_mut().ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "{op}: the host block was not made by this device's host_block"
            ))
        })
    }
}

/// Plain host memory, for devices that copy synchronously (the CPU, HIP): nothing to wait for.
#[derive(Debug, Default)]
pub(crate) struct PlainBlock(pub(crate) Vec<u8>);

impl HostBlock for PlainBlock {
    fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        Ok(&mut self.0)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
