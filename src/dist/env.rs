//! [`DistEnv`]: the multi-process launch as torchrun describes it in the environment.

use std::time::Duration;

use crate::error::{Error, Result};

/// Default bound on the rendezvous (`RNN_RENDEZVOUS_TIMEOUT`, seconds).
pub const DEFAULT_RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(300);

/// Where this process stands in a multi-process run: torchrun's variables `RANK`,
/// `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`, plus two of ours.
///
/// The rendezvous listens on `MASTER_PORT`, except under torchrun itself (which sets
/// `TORCHELASTIC_RUN_ID` and keeps its own store on `MASTER_PORT`), where it uses
/// `MASTER_PORT + 1`; `RNN_RENDEZVOUS_PORT` overrides both. `RNN_RENDEZVOUS_TIMEOUT`
/// (seconds, default 300) bounds it. The run's id (`RNN_RUN_ID`, else torchrun's
/// `TORCHELASTIC_RUN_ID`, else none) keeps a rank of another run that reaches the same port
/// from being handed this run's communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistEnv {
    /// Global rank, `0..world_size`.
    pub rank: usize,
    /// Number of processes.
    pub world_size: usize,
    /// Rank on this host: the GPU this process uses (`cuda:<local_rank>`).
    pub local_rank: usize,
    /// Host name or address of rank 0.
    pub master_addr: String,
    /// The TCP port of the id exchange (see the type docs).
    pub port: u16,
    /// Bound on the whole exchange.
    pub timeout: Duration,
    /// What every process of this run shares and no other run does (see the type docs; empty
    /// when unset): rank 0 refuses ranks with another.
    pub run_id: String,
}

impl DistEnv {
    /// Reads the process environment: `Ok(None)` when neither `RANK` nor `WORLD_SIZE` is set
    /// (a single-process run), an [`Error::Rendezvous`] naming the variable when one is
    /// missing or malformed.
    pub fn from_env() -> Result<Option<DistEnv>> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`DistEnv::from_env`], with the variables looked up through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<DistEnv>> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if get("RANK").is_none() && get("WORLD_SIZE").is_none() {
            return Ok(None);
        }
        let need = |name: &str| {
            get(name).ok_or_else(|| {
                Error::Rendezvous(format!(
                    "{name} is not set (a multi-process run needs RANK, WORLD_SIZE, \
                     MASTER_ADDR and MASTER_PORT, as torchrun sets them)"
                ))
            })
        };
        let number = |name: &str, text: String| -> Result<u64> {
            text.trim().parse::<u64>().map_err(|_| {
                Error::Rendezvous(format!("{name}={text:?} is not a non-negative integer"))
            })
        };
        let rank = number("RANK", need("RANK")?)? as usize;
        let world_size = number("WORLD_SIZE", need("WORLD_SIZE")?)? as usize;
        if world_size == 0 || rank >= world_size {
            return Err(Error::Rendezvous(format!(
                "RANK={rank} is outside WORLD_SIZE={world_size}"
            )));
        }
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => number("LOCAL_RANK", v)? as usize,
            None => rank,
        };
        let master_addr = need("MASTER_ADDR")?.trim().to_string();
        let master_port = number("MASTER_PORT", need("MASTER_PORT")?)?;
        let port = match get("RNN_RENDEZVOUS_PORT") {
            Some(v) => number("RNN_RENDEZVOUS_PORT", v)?,
            None if get("TORCHELASTIC_RUN_ID").is_some() => master_port + 1,
            None => master_port,
        };
        if port == 0 || port > u16::MAX as u64 {
            return Err(Error::Rendezvous(format!(
                "rendezvous port {port} is not a TCP port (1..=65535)"
            )));
        }
        let timeout = match get("RNN_RENDEZVOUS_TIMEOUT") {
            Some(v) => {
                let s: f64 = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && s.is_finite())
                    .ok_or_else(|| {
                        Error::Rendezvous(format!(
                            "RNN_RENDEZVOUS_TIMEOUT={v:?} is not a positive number of seconds"
                        ))
                    })?;
                Duration::from_secs_f64(s)
            }
            None => DEFAULT_RENDEZVOUS_TIMEOUT,
        };
        let run_id = get("RNN_RUN_ID")
            .or_else(|| get("TORCHELASTIC_RUN_ID"))
            .unwrap_or_default();
        Ok(Some(DistEnv {
            rank,
            world_size,
            local_rank,
            master_addr,
            port: port as u16,
            timeout,
            run_id,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn no_rank_and_no_world_size_is_a_single_process_run() {
        assert_eq!(
            DistEnv::from_vars(vars(&[("MASTER_PORT", "1")])).unwrap(),
            None
        );
    }

    #[test]
    fn torchrun_variables_are_read() {
        let base = [
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
        ];
        let e = DistEnv::from_vars(vars(&base)).unwrap().unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (3, 4, 1));
        assert_eq!((e.master_addr.as_str(), e.port), ("node0", 29500));
        assert_eq!(e.timeout, DEFAULT_RENDEZVOUS_TIMEOUT);
        assert_eq!(e.run_id, "");
        let mut under_torchrun = base.to_vec();
        under_torchrun.push(("TORCHELASTIC_RUN_ID", "none"));
        let e = DistEnv::from_vars(vars(&under_torchrun)).unwrap().unwrap();
        assert_eq!(e.port, 29501, "torchrun's own store keeps MASTER_PORT");
        assert_eq!(e.run_id, "none");
        under_torchrun.push(("RNN_RENDEZVOUS_PORT", "4000"));
        under_torchrun.push(("RNN_RENDEZVOUS_TIMEOUT", "2.5"));
        under_torchrun.push(("RNN_RUN_ID", "job-7"));
        let e = DistEnv::from_vars(vars(&under_torchrun)).unwrap().unwrap();
        assert_eq!((e.port, e.timeout), (4000, Duration::from_millis(2500)));
        assert_eq!(e.run_id, "job-7");
    }

    #[test]
    fn missing_or_bad_variables_are_named() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&[("RANK", "0")], "WORLD_SIZE"),
            (&[("RANK", "0"), ("WORLD_SIZE", "2")], "MASTER_ADDR"),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")],
                "MASTER_PORT",
            ),
            (&[("RANK", "x"), ("WORLD_SIZE", "2")], "RANK=\"x\""),
            (&[("RANK", "2"), ("WORLD_SIZE", "2")], "outside"),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "70000"),
                ],
                "70000",
            ),
        ];
        for (pairs, needle) in cases {
            let e = DistEnv::from_vars(vars(pairs)).unwrap_err();
            assert!(matches!(e, Error::Rendezvous(_)), "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
    }
}
