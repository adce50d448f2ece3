//! Truncated backpropagation through time ([`super::TrainingConfig::carry_state`]): a long
//! token stream laid out as parallel streams cut into windows ([`Dataset::token_streams`]),
//! and the device-side copy that hands each cell's final state to the next batch as its
//! initial state.
//!
//! The copy runs at the end of every training step, inside the recorded step where steps are
//! recorded (the state blocks keep their addresses), so a replayed step carries the state as
//! an eager one does. The initial states are zeroed at the start and at the end of every epoch
//! (so the validation after it, which may share the workspace, starts from zeros as always).

use crate::error::{Error, Result};

use super::data::{Dataset, Targets};
use super::layer::Layer;
use super::network::Network;
use super::workspace::Workspace;

impl Dataset {
    /// Next-token prediction over one long sequence of `tokens` (each in `0..classes`) for
    /// truncated backpropagation through time: the sequence is cut into `streams` equal
    /// consecutive parts (the tail that does not fill them is dropped), and each part into
    /// windows of `window` steps; sample `w * streams + b` is window `w` of stream `b`, its
    /// targets the tokens one step later. With `batch_size = streams`, shuffling off and
    /// [`super::TrainingConfig::carry_state`], batch `w` holds window `w` of every stream and
    /// each stream's state runs on across the windows. The inputs are token ids (a network
    /// with an embedding first).
    ///
    /// ```
    /// use rnn::nn::Dataset;
    /// let tokens: Vec<u32> = (0..21).map(|i| i % 5).collect();
    /// // 2 streams of 10 steps (the 21st token is the last target), windows of 5: 4 samples.
    /// let data = Dataset::token_streams(&tokens, 5, 2, 5)?;
    /// assert_eq!(data.len(), 4);
    /// // Sample 2 is window 1 of stream 0: tokens 5..10.
    /// assert_eq!(&data.token_ids().unwrap()[10..15], &tokens[5..10]);
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn token_streams(
        tokens: &[u32],
        classes: usize,
        streams: usize,
        window: usize,
    ) -> Result<Dataset> {
        if streams == 0 || window == 0 {
            return Err(Error::InvalidArgument(
                "token_streams: streams and window must be > 0".into(),
            ));
        }
        // Each input needs the token after it as its target.
        let per_stream = tokens.len().saturating_sub(1) / streams;
        let windows = per_stream / window;
        if windows == 0 {
            return Err(Error::InvalidData(format!(
                "token_streams: {} tokens do not fill {streams} streams of one window of \
                 {window} steps",
                tokens.len()
            )));
        }
        let n = windows * streams * window;
        let (mut ids, mut labels) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for w in 0..windows {
            for b in 0..streams {
                let at = b * per_stream + w * window;
                ids.extend_from_slice(&tokens[at..at + window]);
                labels.extend_from_slice(&tokens[at + 1..at + window + 1]);
            }
        }
        let targets = Targets::Classes {
            labels,
            classes,
            per_sample: window,
        };
        Dataset::tokens(ids, window, targets)
    }
}

impl Network {
    /// Checks that the network can carry its recurrent state from batch to batch of `data`.
    pub(crate) fn check_carry(&self, data: &Dataset) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(format!("carry_state: {m}")));
        // A padded sample's state past its length is computed over padding, and the carry
        // copies the state after the window's last step.
        if data.lengths().is_some() {
            return bad("padded sequences (Dataset::with_lengths) cannot carry their state");
        }
        let mut recurrent = self.layers.iter().filter(|l| {
            matches!(
                l,
                Layer::Rnn(_) | Layer::Lstm(_) | Layer::Gru(_) | Layer::Stack(_)
            )
        });
        if recurrent.clone().next().is_none() {
            return bad("the network has no recurrent layer");
        }
        if recurrent.any(|l| matches!(l, Layer::Stack(s) if s.opts.bidirectional)) {
            return bad("a bidirectional layer has no state to carry forward in time");
        }
        Ok(())
    }

    /// Copies every recurrent cell's final state into its initial state (detached: the next
    /// pass reads it as a given start).
    pub(crate) fn carry_state_ws(&self, ws: &Workspace) -> Result<()> {
        let ops = self.ctx.ops();
        for v in self.state_views(ws)?.iter().flatten() {
            ops.copy(v.h_n, v.h0)?;
            if let (Some(c_n), Some(c0)) = (v.c_n, v.c0) {
                ops.copy(c_n, c0)?;
            }
        }
        Ok(())
    }
}
