//! Where the disk cache lives and whether it is on, from `RNN_CACHE`, `RNN_CACHE_DIR`,
//! `XDG_CACHE_HOME` and `HOME`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::env_switch::Switch;
use crate::error::{Error, Result};

/// The environment variables that configure the kernel cache, as values, so that the rules can
/// be applied (and tested) without touching the process environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheEnv {
    /// `RNN_CACHE`: `off`, `0` or `false` disables the disk cache; `on`, `1`, `true` or empty
    /// leave it on.
    pub cache: Option<OsString>,
    /// `RNN_CACHE_DIR`: the cache directory itself.
    pub cache_dir: Option<OsString>,
    /// `XDG_CACHE_HOME`: the cache goes in its `rnn` subdirectory (only if absolute, as the XDG
    /// spec requires).
    pub xdg_cache_home: Option<OsString>,
    /// `HOME`: the cache goes in `.cache/rnn` under it.
    pub home: Option<OsString>,
}

impl CacheEnv {
    /// The values of this process's environment.
    pub fn current() -> Self {
        CacheEnv {
            cache: std::env::var_os("RNN_CACHE"),
            cache_dir: std::env::var_os("RNN_CACHE_DIR"),
            xdg_cache_home: std::env::var_os("XDG_CACHE_HOME"),
            home: std::env::var_os("HOME"),
        }
    }
}

/// Whether `RNN_CACHE` enables the disk cache: unset, empty, `1`, `on`, `true` do; `0`, `off`,
/// `false` do not; anything else is [`Error::InvalidEnv`].
pub(crate) fn enabled(value: Option<&OsString>) -> Result<bool> {
    Switch {
        name: "RNN_CACHE",
        unset: true,
        empty: true,
        yes_no: false,
    }
    .parse(value.map(OsString::as_os_str))
}

/// The cache directory the variables select, or `None` when no variable names a place for it.
pub(crate) fn directory(env: &CacheEnv) -> Option<PathBuf> {
    let set = |v: &Option<OsString>| v.as_ref().filter(|s| !s.is_empty()).map(PathBuf::from);
    set(&env.cache_dir)
        .or_else(|| {
            set(&env.xdg_cache_home)
                .filter(|p| p.is_absolute())
                .map(|xdg| xdg.join("rnn"))
        })
        .or_else(|| set(&env.home).map(|home| home.join(".cache").join("rnn")))
}

/// Logs an invalid configuration once per process; `from_env` may run for every compile.
pub(crate) fn warn_invalid_once(e: &Error) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        log::warn!("{e}; the kernel disk cache stays on");
    }
}
