//! [`Communicator`]: one rank of an NCCL (CUDA) or RCCL (HIP) communicator, queueing its
//! collectives on the stream of the rank's [`Context`], in order with the rest of its work.

use std::ffi::c_void;

use parking_lot::Mutex;

use super::ffi::{self, Api, CollectiveLibrary, Comm, NcclResult, RawUniqueId, UNIQUE_ID_BYTES};
use crate::buffer::View;
use crate::context::Context;
use crate::device::{BackendKind, DeviceId};
use crate::error::{Error, Result};

/// The id every rank of one communicator shares: created by rank 0
/// ([`UniqueId::new`]) and handed to the others (see [`super::rendezvous`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}..)", &self.0[..8])
    }
}

impl UniqueId {
    /// A fresh id from the library (`ncclGetUniqueId`; no GPU is touched).
    pub fn new(library: CollectiveLibrary) -> Result<Self> {
        let api = load(library)?;
        let mut raw = RawUniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: `raw` is a valid out-pointer of the declared struct size.
        check(
            api,
            unsafe { (api.get_unique_id)(&mut raw) },
            "ncclGetUniqueId",
        )?;
        Ok(UniqueId(raw.internal.map(|c| c as u8)))
    }

    fn raw(&self) -> RawUniqueId {
        RawUniqueId {
            internal: self.0.map(|b| b as std::ffi::c_char),
        }
    }
}

/// Facts about a loadable collective library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveInfo {
    /// NCCL or RCCL.
    pub library: CollectiveLibrary,
    /// The version, e.g. `2.27.3`.
    pub version: String,
    /// The file that loaded.
    pub path: String,
}

/// Loads `library` (once per process) and says which file and version, or why it cannot be
/// used (the file names tried and how to install it). Needs no GPU.
pub fn probe(library: CollectiveLibrary) -> Result<CollectiveInfo> {
    let api = load(library)?;
    Ok(CollectiveInfo {
        library,
        version: ffi::version_text(api.version),
        path: api.path.clone(),
    })
}

fn load(library: CollectiveLibrary) -> Result<&'static Api> {
    ffi::api(library).map_err(|reason| Error::CollectiveUnavailable {
        library: library.name().into(),
        reason,
    })
}

fn check(api: &Api, code: NcclResult, call: &str) -> Result<()> {
    if code == ffi::NCCL_SUCCESS || code == ffi::NCCL_IN_PROGRESS {
        return Ok(());
    }
    Err(Error::Collective {
        library: api.library.name().into(),
        call: call.into(),
        code: code as i64,
        message: api.error_text(code),
    })
}

/// The collective library for devices of `backend`: NCCL for CUDA, RCCL for HIP; other
/// backends have none.
pub fn library_for(id: DeviceId) -> Result<CollectiveLibrary> {
    match id.backend() {
        BackendKind::Cuda => Ok(CollectiveLibrary::Nccl),
        BackendKind::Hip => Ok(CollectiveLibrary::Rccl),
        other => Err(Error::CollectiveUnavailable {
            library: "NCCL/RCCL".into(),
            reason: format!(
                "{id} is a {other} device; multi-device training needs CUDA devices (NCCL) or \
                 HIP devices (RCCL)"
            ),
        }),
    }
}

/// A collective that works in place on one f32 buffer of every rank.
#[derive(Clone, Copy)]
enum InPlace {
    /// `ncclAllReduce` with this `ncclRedOp_t`.
    AllReduce(i32),
    /// `ncclBroadcast` from this root rank.
    Broadcast(i32),
}

/// One rank of a communicator. Calls are serialized (a communicator must not be used by two
/// threads at once); each queues on the stream of the context it is given, which must be
/// the rank's own context.
pub struct Communicator {
    api: &'static Api,
    comm: Mutex<Comm>,
    rank: usize,
    world: usize,
    device: DeviceId,
}

// SAFETY: an NCCL communicator may be used from any thread as long as calls on it do not
// overlap; every use goes through the mutex.
unsafe impl Send for Communicator {}
// SAFETY: see Send: shared use is serialized by the mutex.
unsafe impl Sync for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator({} rank {}/{} on {})",
            self.api.library.name(),
            self.rank,
            self.world,
            self.device
        )
    }
}

/// Makes `ctx`'s device current on this thread (NCCL picks the device of a new communicator
/// from the current one).
fn bind(ctx: &Context) -> Result<()> {
    let probe = ctx.alloc(1)?;
    ctx.native_queue(probe.view()).map(|_| ())
}

impl Communicator {
    /// One communicator per context, all in this process (`ncclCommInitAll`): rank `i` is
    /// `contexts[i]`. The contexts must be distinct devices of one backend (CUDA or HIP).
    pub fn for_contexts(contexts: &[Context]) -> Result<Vec<Communicator>> {
        let Some(first) = contexts.first() else {
            return Err(Error::InvalidArgument("no devices given".into()));
        };
        let library = library_for(first.id())?;
        let mut ordinals = Vec::with_capacity(contexts.len());
        for c in contexts {
            if library_for(c.id())? != library {
                return Err(Error::InvalidArgument(format!(
                    "devices of one communicator must share a backend: {} and {}",
                    first.id(),
                    c.id()
                )));
            }
            let ordinal = match c.id() {
                DeviceId::Cuda(o) | DeviceId::Hip(o) => o as i32,
                other => unreachable!("library_for accepted {other}"),
            };
            if ordinals.contains(&ordinal) {
                return Err(Error::InvalidArgument(format!(
                    "device {} is listed twice",
                    c.id()
                )));
            }
            ordinals.push(ordinal);
        }
        let api = load(library)?;
        // The driver contexts exist (the contexts hold them); NCCL uses the same primary
        // contexts through the runtime API.
        bind(first)?;
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); contexts.len()];
        // SAFETY: `comms` has one slot per ordinal; `ordinals` lives across the call.
        let code = unsafe {
            (api.comm_init_all)(comms.as_mut_ptr(), ordinals.len() as i32, ordinals.as_ptr())
        };
        check(api, code, "ncclCommInitAll")?;
        let world = contexts.len();
        Ok(comms
            .into_iter()
            .zip(contexts)
            .enumerate()
            .map(|(rank, (comm, c))| Communicator {
                api,
                comm: Mutex::new(comm),
                rank,
                world,
                device: c.id(),
            })
            .collect())
    }

    /// Rank `rank` of `world`, joining the communicator `id` names (`ncclCommInitRank`); blocks
    /// until every rank has joined. One call per process (or per thread) and device.
    pub fn join(ctx: &Context, id: &UniqueId, rank: usize, world: usize) -> Result<Communicator> {
        if world == 0 || rank >= world {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} is outside a world of {world}"
            )));
        }
        let library = library_for(ctx.id())?;
        let api = load(library)?;
        bind(ctx)?;
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the id is passed by value as the C API declares.
        let code = unsafe { (api.comm_init_rank)(&mut comm, world as i32, id.raw(), rank as i32) };
        check(api, code, "ncclCommInitRank")?;
        Ok(Communicator {
            api,
            comm: Mutex::new(comm),
            rank,
            world,
            device: ctx.id(),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// NCCL or RCCL.
    pub fn library(&self) -> CollectiveLibrary {
        self.api.library
    }

    /// `(stream, address of x)` on `ctx`, which must be this rank's context.
    fn target(&self, ctx: &Context, x: View<'_>, side: bool) -> Result<(*mut c_void, *mut c_void)> {
        if ctx.id() != self.device {
            return Err(Error::InvalidArgument(format!(
                "rank {} communicates on {}, not {}",
                self.rank,
                self.device,
                ctx.id()
            )));
        }
        let (stream, ptr) = if side {
            ctx.execution().native_side_queue(x)?
        } else {
            ctx.native_queue(x)?
        };
        Ok((stream as usize as *mut c_void, ptr as usize as *mut c_void))
    }

    /// Replaces `x` on every rank by the element-wise sum over the ranks, queued on `ctx`'s
    /// stream.
    pub fn all_reduce_sum(&self, ctx: &Context, x: View<'_>) -> Result<()> {
        self.all_reduce(ctx, x, ffi::NCCL_SUM)
    }

    /// Replaces `x` on every rank by the element-wise mean over the ranks (`ncclAvg`, or a
    /// sum then a scale before NCCL 2.10), queued on `ctx`'s stream.
    pub fn all_reduce_mean(&self, ctx: &Context, x: View<'_>) -> Result<()> {
        if self.api.has_avg() {
            return self.all_reduce(ctx, x, ffi::NCCL_AVG);
        }
        self.all_reduce(ctx, x, ffi::NCCL_SUM)?;
        ctx.ops().scale(x, 1.0 / self.world as f32)
    }

    /// Whether [`Communicator::all_reduce_mean_on_side`] can run (`ncclAvg`, NCCL >= 2.10).
    pub fn has_mean(&self) -> bool {
        self.api.has_avg()
    }

    /// [`Communicator::all_reduce_mean`] queued on `ctx`'s side stream, so that it overlaps
    /// what the main stream does next. The caller orders it: `ctx.execution().order_streams(true)`
    /// before (the side stream waits for `x` to be written) and `order_streams(false)` before
    /// the main stream touches `x` again. Needs `ncclAvg` ([`Communicator::has_mean`]).
    pub fn all_reduce_mean_on_side(&self, ctx: &Context, x: View<'_>) -> Result<()> {
        if !self.api.has_avg() {
            return Err(Error::CollectiveUnavailable {
                library: self.api.library.name().into(),
                reason: format!(
                    "{} {} has no ncclAvg (2.10 or later needed for a mean on the side stream)",
                    self.api.library.name(),
                    ffi::version_text(self.api.version)
                ),
            });
        }
        self.in_place(ctx, x, InPlace::AllReduce(ffi::NCCL_AVG), true)
    }

    fn all_reduce(&self, ctx: &Context, x: View<'_>, op: i32) -> Result<()> {
        self.in_place(ctx, x, InPlace::AllReduce(op), false)
    }

    /// Queues `collective` on `x` in place, on `ctx`'s stream or (`side`) its side stream;
    /// nothing to do in a world of one or for an empty `x`.
    fn in_place(&self, ctx: &Context, x: View<'_>, collective: InPlace, side: bool) -> Result<()> {
        if self.world == 1 || x.is_empty() {
            return Ok(());
        }
        let (run, call, arg) = match collective {
            InPlace::AllReduce(op) => (self.api.all_reduce, "ncclAllReduce", op),
            InPlace::Broadcast(root) => (self.api.broadcast, "ncclBroadcast", root),
        };
        let (stream, ptr) = self.target(ctx, x, side)?;
        let comm = self.comm.lock();
        if comm.is_null() {
            return Err(self.released());
        }
        // SAFETY: `run` is ncclAllReduce or ncclBroadcast, bound with their C type (the fifth
        // argument the reduction or the root rank); `ptr` addresses `x.len()` f32 of this
        // rank's device memory (checked by native_queue), in place; `stream` is the context's
        // live stream; the communicator is live until drop and used by one caller at a time
        // (the lock).
        let code = unsafe { run(ptr, ptr, x.len(), ffi::NCCL_FLOAT32, arg, *comm, stream) };
        check(self.api, code, call)
    }

    /// Copies `x` of rank `root` into `x` of every rank, queued on `ctx`'s stream.
    pub fn broadcast(&self, ctx: &Context, x: View<'_>, root: usize) -> Result<()> {
        if root >= self.world {
            return Err(Error::InvalidArgument(format!(
                "broadcast root {root} is outside a world of {}",
                self.world
            )));
        }
        self.in_place(ctx, x, InPlace::Broadcast(root as i32), false)
    }

    /// Aborts the communicator (`ncclCommAbort`): collectives of every rank that wait on this
    /// one fail instead of hanging, and later calls here are errors. For a rank that failed.
    pub fn abort(&self) {
        self.release(true);
    }

    /// Releases the communicator now (`ncclCommDestroy`) instead of at drop; later calls are
    /// errors. Each rank of one process should close its own, on its own thread.
    pub fn close(&self) {
        self.release(false);
    }

    fn release(&self, abort: bool) {
        let mut comm = self.comm.lock();
        if comm.is_null() {
            return;
        }
        // A communicator whose peer failed cannot be destroyed cleanly (destroy waits for the
        // peer): abort it instead.
        let mut state: NcclResult = 0;
        // SAFETY: live communicator, valid out-pointer.
        let queried = unsafe { (self.api.comm_get_async_error)(*comm, &mut state) };
        let abort = abort || queried != ffi::NCCL_SUCCESS || state != ffi::NCCL_SUCCESS;
        // SAFETY: the communicator was created by ncclCommInit* and is released once: the
        // handle is nulled under the lock.
        let (call, code) = unsafe {
            if abort {
                ("ncclCommAbort", (self.api.comm_abort)(*comm))
            } else {
                ("ncclCommDestroy", (self.api.comm_destroy)(*comm))
            }
        };
        *comm = std::ptr::null_mut();
        if let Err(e) = check(self.api, code, call) {
            log::warn!("rank {} on {}: {e}", self.rank, self.device);
        }
    }

    fn released(&self) -> Error {
        Error::Collective {
            library: self.api.library.name().into(),
            call: "a collective".into(),
            code: -1,
            message: format!(
                "the communicator of rank {} was closed or aborted (another rank failed?)",
                self.rank
            ),
        }
    }

    /// An error the library reported asynchronously (a peer failed, a network error), if any.
    pub fn async_error(&self) -> Result<()> {
        let comm = self.comm.lock();
        if comm.is_null() {
            return Err(self.released());
        }
        let mut state: NcclResult = 0;
        // SAFETY: live communicator, valid out-pointer.
        let code = unsafe { (self.api.comm_get_async_error)(*comm, &mut state) };
        check(self.api, code, "ncclCommGetAsyncError")?;
        check(
            self.api,
            state,
            "an earlier collective (asynchronous error)",
        )
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.release(false);
    }
}
