//! The id exchange of a multi-process run: rank 0 listens on a TCP port and hands the
//! communicator's [`UniqueId`] to every other rank, which connects to `MASTER_ADDR`. Every
//! wait is bounded by the [`DistEnv`]'s timeout, and running out of it is an
//! [`Error::Rendezvous`] that says who was waited for where.
//!
//! Wire format (all little endian): a rank sends `MAGIC`, the world size, its rank and the
//! length of its run id (u32 each), then the run id's UTF-8 bytes; rank 0 answers `MAGIC`, a
//! status byte, then either the 128 id bytes (status 0) or a u32 length and a UTF-8 message
//! (status 1: the rank was refused, e.g. a world-size or run-id mismatch).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::comm::UniqueId;
use super::env::DistEnv;
use super::ffi::UNIQUE_ID_BYTES;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"RNNRDV2\n";
/// The longest run id a hello may carry.
const MAX_RUN_ID: usize = 1024;
const POLL: Duration = Duration::from_millis(20);

/// Rank 0 calls `make_id` and serves its result to every other rank; the other ranks fetch it
/// from rank 0. Returns the id on every rank.
pub fn exchange(env: &DistEnv, make_id: impl FnOnce() -> Result<UniqueId>) -> Result<UniqueId> {
    let deadline = Instant::now() + env.timeout;
    if env.rank == 0 {
        // Listen before the (slow) id creation so early ranks find the port open sooner.
        let listener = listen(env.port)?;
        let id = make_id()?;
        serve(listener, env, &id, deadline)?;
        Ok(id)
    } else {
        fetch(env, deadline)
    }
}

fn listen(port: u16) -> Result<TcpListener> {
    let listener = TcpListener::bind(("0.0.0.0", port)).map_err(|e| {
        Error::Rendezvous(format!(
            "rank 0 cannot listen on TCP port {port}: {e} (is another run using it? set \
             MASTER_PORT or RNN_RENDEZVOUS_PORT to a free port)"
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Rendezvous(format!("port {port}: {e}")))?;
    Ok(listener)
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

fn serve(listener: TcpListener, env: &DistEnv, id: &UniqueId, deadline: Instant) -> Result<()> {
    let mut waiting: Vec<usize> = (1..env.world_size).collect();
    while !waiting.is_empty() {
        let (mut stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if remaining(deadline).is_none() {
                    return Err(Error::Rendezvous(format!(
                        "rank 0 waited {:.1} s on port {} and rank(s) {waiting:?} of {} never \
                         connected (are they running, with MASTER_ADDR pointing at this host \
                         and the port reachable?)",
                        env.timeout.as_secs_f64(),
                        env.port,
                        env.world_size
                    )));
                }
                std::thread::sleep(POLL);
                continue;
            }
            Err(e) => {
                return Err(Error::Rendezvous(format!(
                    "accept on port {}: {e}",
                    env.port
                )));
            }
        };
        match answer(&mut stream, env, &waiting, id, deadline) {
            Ok(rank) => waiting.retain(|&r| r != rank),
            // A stray or refused connection must not end the run: log it and keep waiting.
            Err(e) => log::warn!("rendezvous: connection from {peer} refused: {e}"),
        }
    }
    Ok(())
}

/// Reads one rank's hello and answers it; the rank on success.
fn answer(
    stream: &mut TcpStream,
    env: &DistEnv,
    waiting: &[usize],
    id: &UniqueId,
    deadline: Instant,
) -> Result<usize> {
    let io = |e: std::io::Error| Error::Rendezvous(format!("reading a rank's hello: {e}"));
    stream.set_nonblocking(false).map_err(io)?;
    let limit = remaining(deadline)
        .unwrap_or(POLL)
        .min(Duration::from_secs(10));
    stream.set_read_timeout(Some(limit)).map_err(io)?;
    stream.set_write_timeout(Some(limit)).map_err(io)?;
    let mut hello = [0u8; 20];
    stream.read_exact(&mut hello).map_err(io)?;
    if &hello[..8] != MAGIC {
        return Err(Error::Rendezvous(
            "not an rnn rendezvous hello (or one of another rnn version)".into(),
        ));
    }
    let field = |at: usize| u32::from_le_bytes(hello[at..at + 4].try_into().expect("4 bytes"));
    let (world, rank, run_len) = (field(8) as usize, field(12) as usize, field(16) as usize);
    if run_len > MAX_RUN_ID {
        return Err(Error::Rendezvous(format!(
            "a run id of {run_len} bytes (at most {MAX_RUN_ID})"
        )));
    }
    let mut run_id = vec![0u8; run_len];
    stream.read_exact(&mut run_id).map_err(io)?;
    let run_id = String::from_utf8_lossy(&run_id);
    let refusal = if run_id != env.run_id {
        Some(format!(
            "rank {rank} belongs to run {run_id:?}, rank 0 to run {:?} (two runs on one port? \
             RNN_RUN_ID or TORCHELASTIC_RUN_ID differ)",
            env.run_id
        ))
    } else if world != env.world_size {
        Some(format!(
            "rank {rank} says WORLD_SIZE={world}, rank 0 has WORLD_SIZE={}",
            env.world_size
        ))
    } else if !waiting.contains(&rank) {
        Some(format!(
            "rank {rank} is not expected (already joined, or rank 0's own rank)"
        ))
    } else {
        None
    };
    let mut reply = MAGIC.to_vec();
    match &refusal {
        None => {
            reply.push(0);
            reply.extend_from_slice(&id.0);
        }
        Some(msg) => {
            reply.push(1);
            reply.extend_from_slice(&(msg.len() as u32).to_le_bytes());
            reply.extend_from_slice(msg.as_bytes());
        }
    }
    stream
        .write_all(&reply)
        .and_then(|()| stream.flush())
        .map_err(|e| Error::Rendezvous(format!("answering rank {rank}: {e}")))?;
    match refusal {
        None => Ok(rank),
        Some(msg) => Err(Error::Rendezvous(msg)),
    }
}

fn resolve(env: &DistEnv) -> Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = (env.master_addr.as_str(), env.port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::Rendezvous(format!(
                "MASTER_ADDR={:?} does not resolve: {e}",
                env.master_addr
            ))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(Error::Rendezvous(format!(
            "MASTER_ADDR={:?} resolves to no address",
            env.master_addr
        )));
    }
    Ok(addrs)
}

fn fetch(env: &DistEnv, deadline: Instant) -> Result<UniqueId> {
    let addrs = resolve(env)?;
    let mut last = String::from("no attempt");
    loop {
        let Some(left) = remaining(deadline) else {
            return Err(Error::Rendezvous(format!(
                "rank {} got no answer from rank 0 at {}:{} within {:.1} s (last error: \
                 {last}); is rank 0 running, are MASTER_ADDR/MASTER_PORT the same for every \
                 rank, and is the port reachable?",
                env.rank,
                env.master_addr,
                env.port,
                env.timeout.as_secs_f64()
            )));
        };
        for addr in &addrs {
            match TcpStream::connect_timeout(addr, left.min(Duration::from_secs(2))) {
                Ok(mut stream) => match ask(&mut stream, env, deadline) {
                    Ok(id) => return Ok(id),
                    // Refused by rank 0: retrying cannot help.
                    Err(Refused(msg)) => return Err(Error::Rendezvous(msg)),
                    Err(Io(e)) => last = format!("{addr}: {e}"),
                },
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        std::thread::sleep(POLL * 5);
    }
}

enum AskError {
    Refused(String),
    Io(std::io::Error),
}
use AskError::{Io, Refused};

fn ask(
    stream: &mut TcpStream,
    env: &DistEnv,
    deadline: Instant,
) -> std::result::Result<UniqueId, AskError> {
    let limit = remaining(deadline).unwrap_or(POLL);
    stream.set_read_timeout(Some(limit)).map_err(Io)?;
    stream.set_write_timeout(Some(limit)).map_err(Io)?;
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&(env.world_size as u32).to_le_bytes());
    hello.extend_from_slice(&(env.rank as u32).to_le_bytes());
    let run_id = env.run_id.as_bytes();
    if run_id.len() > MAX_RUN_ID {
        return Err(Refused(format!(
            "the run id is {} bytes long, at most {MAX_RUN_ID} fit the rendezvous",
            run_id.len()
        )));
    }
    hello.extend_from_slice(&(run_id.len() as u32).to_le_bytes());
    hello.extend_from_slice(run_id);
    stream.write_all(&hello).map_err(Io)?;
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).map_err(Io)?;
    if &head[..8] != MAGIC {
        return Err(Refused(format!(
            "{}:{} answered, but not as an rnn rendezvous (another service on that port?)",
            env.master_addr, env.port
        )));
    }
    if head[8] == 0 {
        let mut id = [0u8; UNIQUE_ID_BYTES];
        stream.read_exact(&mut id).map_err(Io)?;
        return Ok(UniqueId(id));
    }
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(Io)?;
    let mut msg = vec![0u8; (u32::from_le_bytes(len) as usize).min(4096)];
    stream.read_exact(&mut msg).map_err(Io)?;
    Err(Refused(format!(
        "rank 0 refused rank {}: {}",
        env.rank,
        String::from_utf8_lossy(&msg)
    )))
}
