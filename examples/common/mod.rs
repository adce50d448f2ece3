//! What the examples share: their `main` around an argument parser and a body, and the
//! parsing of a flag's value.

// Each example is its own crate and uses part of this.
#![allow(dead_code)]

use std::fmt::Display;
use std::process::ExitCode;

use rnn::DeviceId;

/// An example's `main`: `parse` reads the arguments (`Ok(None)` when help was asked for, which
/// prints `usage`); a parse error prints it with `usage` and exits with 2, an error of `run` exits
/// with 1.
pub fn main<A, E: Display>(
    usage: &str,
    parse: impl FnOnce() -> Result<Option<A>, String>,
    run: impl FnOnce(&A) -> Result<(), E>,
) -> ExitCode {
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The value after flag `name`, taken from `args`.
pub fn value(args: &mut impl Iterator<Item = String>, name: &str) -> Result<String, String> {
    args.next().ok_or_else(|| format!("{name} needs a value"))
}

/// The device id after flag `name` (`cuda:0`, `opencl:0:1`, `hip:0`, `cpu`).
pub fn device(args: &mut impl Iterator<Item = String>, name: &str) -> Result<DeviceId, String> {
    value(args, name)?
        .parse()
        .map_err(|e: rnn::Error| format!("{name}: {e}"))
}

/// The positive integer after flag `name`.
pub fn count(args: &mut impl Iterator<Item = String>, name: &str) -> Result<usize, String> {
    let v = value(args, name)?;
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} takes a positive integer, got '{v}'")),
    }
}
