//! Data-parallel training across devices and processes: NCCL (CUDA) and RCCL (HIP), loaded at
//! run time, and the rendezvous that starts a multi-process run.
//!
//! - [`probe`] says whether NCCL/RCCL loads, which file and which version.
//! - [`Communicator`] is one rank: [`Communicator::for_contexts`] makes all ranks of one
//!   process (one per device), [`Communicator::join`] one rank of a multi-process run.
//! - [`DistEnv`] reads torchrun's variables; [`rendezvous::exchange`] hands rank 0's
//!   [`UniqueId`] to the other ranks over TCP.
//!
//! Training uses these through `TrainingConfig::devices` (one process, several GPUs) and
//! `Network::train_distributed` (one process per GPU).
//!
//! The binding is the `nccl` feature (it serves NCCL on CUDA and RCCL on HIP, so it implies
//! neither runtime); without it, [`probe`] and the communicators answer
//! [`crate::Error::CollectiveUnavailable`], "built without the `nccl` feature".
//!
//! RCCL is bound exactly as NCCL is (same symbols, `librccl.so`); it has not been executed,
//! for want of an AMD GPU.

mod comm;
mod env;
// Without the `nccl` feature the loader answers "built without the `nccl` feature" and the
// binding behind it is never reached.
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
mod ffi;
pub mod rendezvous;

pub use comm::{CollectiveInfo, Communicator, UniqueId, library_for, probe};
pub use env::{DEFAULT_RENDEZVOUS_TIMEOUT, DistEnv};
pub use ffi::{CollectiveLibrary, UNIQUE_ID_BYTES};
