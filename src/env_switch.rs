//! On/off environment variables (`RNN_CACHE`, `RNN_GRAPHS`, `RNN_PROFILE_KERNELS`,
//! `RNN_OPENCL_PERSISTENT`, `RNN_RECURRENT_GEMM_STEPS`, `RNN_RECURRENT_BLOCK_LOCAL`,
//! `RNN_RECURRENT_PAIR`): one parser, each variable with its defaults and words.
//! `RNN_RECURRENT_ALGO`, which names an algorithm, is read by `recurrent_algorithm`.

use std::ffi::OsStr;

use crate::error::{Error, Result};

/// An on/off variable: its name, its value when unset and when set but empty, and whether
/// `yes`/`no` are words for on/off besides `1`/`0`, `on`/`off` and `true`/`false`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Switch {
    pub(crate) name: &'static str,
    pub(crate) unset: bool,
    pub(crate) empty: bool,
    pub(crate) yes_no: bool,
}

impl Switch {
    /// `value` (the variable's, if set) as on or off, case and surrounding spaces ignored;
    /// anything else, or a value that is not UTF-8, is [`Error::InvalidEnv`].
    pub(crate) fn parse(&self, value: Option<&OsStr>) -> Result<bool> {
        let Some(raw) = value else {
            return Ok(self.unset);
        };
        let invalid = || Error::InvalidEnv {
            name: self.name.into(),
            value: raw.to_string_lossy().into_owned(),
            reason: if self.yes_no {
                "expected 1, 0, on, off, true, false, yes or no"
            } else {
                "expected 1, 0, on, off, true or false"
            }
            .into(),
        };
        match raw
            .to_str()
            .ok_or_else(invalid)?
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "" => Ok(self.empty),
            "1" | "on" | "true" => Ok(true),
            "0" | "off" | "false" => Ok(false),
            "yes" if self.yes_no => Ok(true),
            "no" if self.yes_no => Ok(false),
            _ => Err(invalid()),
        }
    }

    /// [`Switch::parse`] on this process's environment.
    pub(crate) fn read_env(&self) -> Result<bool> {
        self.parse(std::env::var_os(self.name).as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::Switch;
    use std::ffi::OsStr;

    #[test]
    fn defaults_and_words_are_per_variable() {
        let strict = Switch {
            name: "X",
            unset: false,
            empty: false,
            yes_no: false,
        };
        let lenient = Switch {
            name: "Y",
            unset: true,
            empty: true,
            yes_no: true,
        };
        assert!(!strict.parse(None).unwrap() && lenient.parse(None).unwrap());
        assert!(!strict.parse(Some(OsStr::new(" "))).unwrap());
        assert!(lenient.parse(Some(OsStr::new(""))).unwrap());
        assert!(strict.parse(Some(OsStr::new("yes"))).is_err());
        assert!(!lenient.parse(Some(OsStr::new(" No "))).unwrap());
        assert!(strict.parse(Some(OsStr::new("On"))).unwrap());
    }
}
