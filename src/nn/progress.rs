//! What training shows while it runs: a progress bar per epoch on a terminal, one plain line
//! per epoch anywhere else (CI logs, pipes, files), or nothing.
//!
//! The bar's running loss comes from the device, and reading it waits for the queued steps; so
//! it is read at most [`READS_PER_SECOND`] times a second, never once per step. Samples per
//! second and the ETA are host-side counts.
//!
//! The bar is drawn by `indicatif` (the `progress` feature); without it, `Progress::Auto` prints
//! the plain lines on a terminal too.

#[cfg(feature = "progress")]
use std::io::IsTerminal;
use std::time::{Duration, Instant};

#[cfg(feature = "progress")]
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Without the `progress` feature no bar is ever made.
#[cfg(not(feature = "progress"))]
enum ProgressBar {}

#[cfg(not(feature = "progress"))]
impl ProgressBar {
    fn set_position(&self, _: u64) {
        match *self {}
    }
    fn set_message(&self, _: String) {
        match *self {}
    }
    fn finish_and_clear(&self) {
        match *self {}
    }
    fn abandon(&self) {
        match *self {}
    }
}

/// How [`crate::nn::Network::train`] reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Progress {
    /// A progress bar per epoch when stderr is a terminal (and the `progress` feature is on),
    /// else one plain line per epoch on stderr.
    #[default]
    Auto,
    /// One plain line per epoch on stderr, terminal or not.
    Lines,
    /// Nothing (the per-epoch `log::info!` lines of `log_every` remain).
    Off,
}

/// At most this many device reads of the running loss per second while a bar is drawn.
pub const READS_PER_SECOND: u32 = 4;

enum Mode {
    #[cfg(feature = "progress")]
    Bar,
    Lines,
    Off,
}

/// Draws one run's progress.
pub(crate) struct Reporter {
    mode: Mode,
    bar: Option<ProgressBar>,
    last_read: Instant,
}

impl Reporter {
    pub(crate) fn new(progress: Progress) -> Self {
        let mode = match progress {
            #[cfg(feature = "progress")]
            Progress::Auto if std::io::stderr().is_terminal() => Mode::Bar,
            Progress::Auto | Progress::Lines => Mode::Lines,
            Progress::Off => Mode::Off,
        };
        Reporter {
            mode,
            bar: None,
            last_read: Instant::now(),
        }
    }

    /// Whether anything is shown (then the per-epoch `log::info!` line would repeat it).
    pub(crate) fn shows_epochs(&self) -> bool {
        !matches!(self.mode, Mode::Off)
    }

    /// Starts the bar of epoch `epoch` of `epochs` over `samples` samples.
    #[cfg_attr(not(feature = "progress"), allow(unused_variables))]
    pub(crate) fn start_epoch(&mut self, epoch: usize, epochs: usize, samples: usize) {
        #[cfg(feature = "progress")]
        if matches!(self.mode, Mode::Bar) {
            self.bar = Some(bar(epoch, epochs, samples));
            self.last_read = Instant::now();
        }
    }

    /// Moves the bar to `done` samples (host-side; no device access).
    pub(crate) fn advance(&self, done: usize) {
        if let Some(bar) = &self.bar {
            bar.set_position(done as u64);
        }
    }

    /// Whether the caller should read the running metrics from the device now: only while a
    /// bar is drawn, and at most [`READS_PER_SECOND`] times a second.
    pub(crate) fn wants_read(&mut self) -> bool {
        let period = Duration::from_secs(1) / READS_PER_SECOND;
        if self.bar.is_some() && self.last_read.elapsed() >= period {
            self.last_read = Instant::now();
            return true;
        }
        false
    }

    /// Shows the running loss (and device figures, when there are any) on the bar.
    pub(crate) fn show(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Ends the epoch: the bar is replaced by (or, without a bar, there is printed) `line`.
    pub(crate) fn finish_epoch(&mut self, line: &str) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if !matches!(self.mode, Mode::Off) {
            eprintln!("{line}");
        }
    }
}

/// The bar of epoch `epoch` of `epochs` over `samples` samples.
#[cfg(feature = "progress")]
fn bar(epoch: usize, epochs: usize, samples: usize) -> ProgressBar {
    let style =
        ProgressStyle::with_template("{prefix} [{bar:25}] {percent:>3}% {rate} eta {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key(
                "rate",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0} samples/s", s.per_sec());
                },
            )
            .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(samples as u64), ProgressDrawTarget::stderr_with_hz(10))
        .with_style(style)
        .with_prefix(format!("epoch {epoch}/{epochs}"))
}

impl Drop for Reporter {
    /// A bar still drawn belongs to an epoch that ended with an error: it stays on screen,
    /// where it stopped.
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}
