//! Variable-length sequences on the CPU: the reference for the `length_layout`, `scale_rows`
//! and `loss_weights` kernels. Sums run in row order.

use super::CpuOps;
use crate::ops::prelude::*;

use super::access::{lock, read_u32};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{LengthLayout, LossWeights, check_scale_rows};

impl SequenceMaskOps for CpuOps {
    fn length_layout(&self, a: LengthLayout<'_>) -> Result<()> {
        let op = LengthLayout::OP;
        let n = a.check(self.context)?;
        let lengths = read_u32(op, self.context, "lengths", &a.lengths)?;
        let (batch, steps) = (lengths.len(), a.steps);
        if n == 0 {
            return Ok(());
        }
        let lens: Vec<usize> = lengths
            .iter()
            .map(|&l| (l as usize).clamp(1, steps))
            .collect();
        let mut mask = vec![0.0f32; n];
        let mut reversal = vec![0u32; n];
        for t in 0..steps {
            for (b, &len) in lens.iter().enumerate() {
                let r = t * batch + b;
                let valid = t < len;
                mask[r] = if valid { 1.0 } else { 0.0 };
                reversal[r] = if valid {
                    ((len - 1 - t) * batch + b) as u32
                } else {
                    r as u32
                };
            }
        }
        let last: Vec<u32> = lens
            .iter()
            .enumerate()
            .map(|(b, &len)| ((len - 1) * batch + b) as u32)
            .collect();
        self.upload(a.mask, &mask)?;
        self.upload_as(a.reversal, &reversal)?;
        self.upload_as(a.last, &last)
    }

    fn scale_rows(&self, x: View<'_>, weights: View<'_>, cols: usize) -> Result<()> {
        let n = check_scale_rows(self.context, &x, &weights, cols)?;
        if n == 0 {
            return Ok(());
        }
        lock("scale_rows", self.context, [weights], [x], |[w], [x]| {
            for (row, &w) in x.chunks_mut(cols).zip(w) {
                if w == 0.0 {
                    row.fill(0.0);
                } else {
                    row.iter_mut().for_each(|v| *v *= w);
                }
            }
        })
    }

    fn loss_weights(&self, a: LossWeights<'_>) -> Result<()> {
        let (ctx, op) = (self.context, LossWeights::OP);
        let rows = a.check(ctx)?;
        let labels = match &a.labels {
            Some((l, ignore)) => Some((read_u32(op, ctx, "labels", l)?, *ignore)),
            None => None,
        };
        let mut mask = vec![1.0f32; rows];
        if let Some(m) = a.mask {
            self.download(m, &mut mask)?;
        }
        let valid: Vec<bool> = (0..rows)
            .map(|r| mask[r] != 0.0 && labels.as_ref().is_none_or(|(l, ig)| l[r] != *ig))
            .collect();
        let count = valid.iter().filter(|&&v| v).count();
        let w = if count == 0 {
            0.0
        } else {
            rows as f32 / count as f32
        };
        let weights: Vec<f32> = valid.iter().map(|&v| if v { w } else { 0.0 }).collect();
        self.upload(a.weights, &weights)?;
        let Some(totals) = a.totals else {
            return Ok(());
        };
        let weighted_sum = |values: &[f32]| -> f32 {
            values
                .iter()
                .zip(&weights)
                .zip(&valid)
                .filter(|(_, v)| **v)
                .map(|((x, w), _)| w * x)
                .sum()
        };
        let mut loss = vec![0.0f32; rows];
        self.download(a.row_loss, &mut loss)?;
        let mut add = vec![weighted_sum(&loss)];
        if let Some(c) = a.row_correct {
            let mut correct = vec![0.0f32; rows];
            self.download(c, &mut correct)?;
            add.push(weighted_sum(&correct));
        }
        let t = totals.slice(0, add.len())?;
        lock(op, ctx, [], [t], |[], [t]| {
            t.iter_mut().zip(&add).for_each(|(t, a)| *t += a);
        })
    }
}
