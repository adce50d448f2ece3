//! [`RecurrentAlgorithm`]: which algorithm a GPU runs recurrent sequences with, forced through
//! `ContextOptions::recurrent_algorithm` or `RNN_RECURRENT_ALGO`, for measuring each one at any
//! shape (benches/recurrent_grid.rs `--algos all`).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How a GPU runs a whole recurrent sequence op (Elman, LSTM, GRU; forward or backward).
///
/// [`RecurrentAlgorithm::Auto`] picks per sequence (docs/performance.md, recurrent section);
/// any other value is tried first for every sequence op, and where it cannot run that sequence
/// (W_hh does not fit a block, the device has no cooperative launch, the variant does not exist
/// in the device's dialect) the op takes the automatic choice instead and writes one
/// `log::debug!` line that says why: forcing an algorithm never makes a model fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecurrentAlgorithm {
    /// The automatic choice (block-local where it fits, then persistent, GEMM or per-step).
    Auto,
    /// The block-local kernels with W_hh in shared (local) memory: one plain launch, every
    /// unit of a tile of rows in one block, no grid barrier (`*_seq_*_local`).
    BlockLocal,
    /// The block-local kernels with W_hh read from global memory through the L1 cache and only
    /// the rows of the tile in local memory (`*_seq_*_l1`; chosen automatically under OpenCL
    /// and HIP only).
    BlockLocalL1,
    /// The block-local kernels with W_hh in registers, each product split along k over a few
    /// threads (`*_seq_*_local_regs`; where gates x hidden x the split is at most 1024
    /// threads: Elman to hidden 146, LSTM to 72, GRU to 85). Chosen automatically for the
    /// Elman cell where it fits; the LSTM and GRU only when forced.
    BlockLocalRegisters,
    /// The persistent kernels: one cooperative launch whose blocks each own a slice of the
    /// hidden units and meet at a grid barrier every step (CUDA; NVIDIA GPUs under OpenCL).
    Persistent,
    /// A GEMM (tensor cores where the device has them) and a cell kernel per step.
    Gemm,
    /// The fused step kernels: product and gate math in one launch per step.
    Steps,
}

impl RecurrentAlgorithm {
    /// Every algorithm other than [`RecurrentAlgorithm::Auto`], in the order the names list.
    pub const FORCIBLE: [RecurrentAlgorithm; 6] = [
        RecurrentAlgorithm::BlockLocal,
        RecurrentAlgorithm::BlockLocalL1,
        RecurrentAlgorithm::BlockLocalRegisters,
        RecurrentAlgorithm::Persistent,
        RecurrentAlgorithm::Gemm,
        RecurrentAlgorithm::Steps,
    ];

    /// The name `RNN_RECURRENT_ALGO` and [`FromStr`] take (`block-local-l1`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RecurrentAlgorithm::Auto => "auto",
            RecurrentAlgorithm::BlockLocal => "block-local",
            RecurrentAlgorithm::BlockLocalL1 => "block-local-l1",
            RecurrentAlgorithm::BlockLocalRegisters => "block-local-regs",
            RecurrentAlgorithm::Persistent => "persistent",
            RecurrentAlgorithm::Gemm => "gemm",
            RecurrentAlgorithm::Steps => "steps",
        }
    }
}

impl fmt::Display for RecurrentAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The expected words, for errors.
const WORDS: &str =
    "expected auto, block-local, block-local-l1, block-local-regs, persistent, gemm or steps";

impl FromStr for RecurrentAlgorithm {
    type Err = Error;

    /// A name of [`RecurrentAlgorithm::name`], case and surrounding spaces ignored.
    fn from_str(s: &str) -> Result<Self> {
        let word = s.trim().to_ascii_lowercase();
        std::iter::once(RecurrentAlgorithm::Auto)
            .chain(RecurrentAlgorithm::FORCIBLE)
            .find(|a| a.name() == word)
            .ok_or_else(|| Error::InvalidArgument(format!("recurrent algorithm '{s}': {WORDS}")))
    }
}

/// `RNN_RECURRENT_ALGO`: a name of [`RecurrentAlgorithm::name`]; unset or empty is `auto`.
const ENV: &str = "RNN_RECURRENT_ALGO";

/// The algorithm every sequence op of a context tries first: the context's choice
/// (`ContextOptions::recurrent_algorithm`), else `RNN_RECURRENT_ALGO`'s; `None` for the
/// automatic choice. Read once, when the context is created; a bad value is
/// [`Error::InvalidEnv`].
pub(crate) fn forced(option: Option<RecurrentAlgorithm>) -> Result<Option<RecurrentAlgorithm>> {
    let chosen = match option {
        Some(a) => a,
        None => parse_env(std::env::var_os(ENV).as_deref())?,
    };
    Ok((chosen != RecurrentAlgorithm::Auto).then_some(chosen))
}

fn parse_env(value: Option<&std::ffi::OsStr>) -> Result<RecurrentAlgorithm> {
    let Some(raw) = value else {
        return Ok(RecurrentAlgorithm::Auto);
    };
    let invalid = || Error::InvalidEnv {
        name: ENV.into(),
        value: raw.to_string_lossy().into_owned(),
        reason: WORDS.into(),
    };
    match raw.to_str().ok_or_else(invalid)?.trim() {
        "" => Ok(RecurrentAlgorithm::Auto),
        word => word.parse().map_err(|_| invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::{RecurrentAlgorithm, forced, parse_env};
    use std::ffi::OsStr;

    #[test]
    fn names_round_trip_and_bad_words_are_errors() {
        for a in RecurrentAlgorithm::FORCIBLE {
            assert_eq!(a.name().parse::<RecurrentAlgorithm>().unwrap(), a);
        }
        assert_eq!(
            " Block-Local-L1 ".parse::<RecurrentAlgorithm>().unwrap(),
            RecurrentAlgorithm::BlockLocalL1
        );
        assert!("cudnn".parse::<RecurrentAlgorithm>().is_err());
        assert_eq!(parse_env(None).unwrap(), RecurrentAlgorithm::Auto);
        assert_eq!(
            parse_env(Some(OsStr::new(" "))).unwrap(),
            RecurrentAlgorithm::Auto
        );
        assert_eq!(
            parse_env(Some(OsStr::new("gemm"))).unwrap(),
            RecurrentAlgorithm::Gemm
        );
        let bad = parse_env(Some(OsStr::new("fast"))).unwrap_err();
        assert!(bad.to_string().contains("RNN_RECURRENT_ALGO"), "{bad}");
    }

    #[test]
    fn the_option_wins_and_auto_forces_nothing() {
        let steps = Some(RecurrentAlgorithm::Steps);
        assert_eq!(forced(steps).unwrap(), steps);
        assert_eq!(forced(Some(RecurrentAlgorithm::Auto)).unwrap(), None);
    }
}
