//! Losses. Both are fused ops that write the per-row loss and the gradient in one launch; the
//! batch mean comes from `grad_scale = 1 / rows`.

/// What the network's output is trained against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// Softmax + cross-entropy over class logits; targets are class indices; reports accuracy.
    SoftmaxCrossEntropy,
    /// Mean squared error over real-valued targets of the output's width.
    Mse,
}

impl Loss {
    /// True when targets are class indices.
    pub fn is_classification(self) -> bool {
        matches!(self, Loss::SoftmaxCrossEntropy)
    }
}
