//! Training-loop scenarios that several tests run on other devices (one device in `ux.rs`, CPU
//! replicas in `replicas.rs`, GPU replicas through NCCL in `nccl_loop.rs`): early stopping that
//! puts back the best epoch, and a resume from a training checkpoint; with the checks that
//! compare two runs.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use rnn::nn::{
    Dataset, EarlyStopping, Loss, LrSchedule, Network, Optimizer, Rng, StopReason, TrainingConfig,
    TrainingHistory,
};
use rnn::{Activation, Context, Error};

use crate::support::rel_err;

/// A fresh, empty directory `rnn-<prefix>-<pid>-<name>` in the system's temporary directory.
pub fn temp_dir(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnn-{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Early stopping that restores the best epoch, with a patience no short run exhausts: the
/// state a resume must carry over.
pub fn keep_best() -> Option<EarlyStopping> {
    Some(EarlyStopping {
        patience: 100,
        min_delta: 0.0,
        restore_best: true,
    })
}

/// A linear warmup over `warmup_steps`, then a cosine down to 1e-4.
pub fn warmup_cosine(warmup_steps: usize) -> LrSchedule {
    LrSchedule::WarmupCosine {
        warmup_steps,
        min_lr: 1e-4,
    }
}

/// Trains `make()` on `base` with early stopping that no epoch can satisfy (a 1e9 improvement,
/// patience 2): the run must end after three epochs, naming epoch 1 the best. Returns that
/// network, whose parameters should be put back to epoch 1's, and `make()` trained for one epoch
/// of `base`.
pub fn stop_early(
    make: impl Fn() -> Network,
    data: &Dataset,
    base: &TrainingConfig,
) -> (Network, Network) {
    let mut stopped = make();
    let h = stopped
        .train(
            data,
            &TrainingConfig {
                epochs: 10,
                early_stopping: Some(EarlyStopping {
                    patience: 2,
                    min_delta: 1e9,
                    restore_best: true,
                }),
                ..base.clone()
            },
        )
        .unwrap();
    assert_eq!(h.stopped, Some(StopReason::EarlyStopping));
    assert_eq!(h.epochs.len(), 3);
    assert_eq!(h.best_epoch, Some(1));
    let mut one_epoch = make();
    one_epoch
        .train(
            data,
            &TrainingConfig {
                epochs: 1,
                ..base.clone()
            },
        )
        .unwrap();
    (stopped, one_epoch)
}

/// The two runs of [`resume`]: the uninterrupted one and the resumed one.
pub struct Resumed {
    /// The uninterrupted run's history.
    pub full: TrainingHistory,
    /// The resumed run's history (the epochs before the cut included).
    pub rest: TrainingHistory,
    /// The network the uninterrupted run trained.
    pub whole: Network,
    /// The network that resumed from the cut's checkpoint.
    pub resumed: Network,
}

/// Trains `make(1)` for the five epochs of `config` (its checkpoint at `whole.safetensors` in
/// `dir`); trains `make(1)` again, stopped by the callback after epoch 2 (its checkpoint at
/// `cut.safetensors`); resumes from that checkpoint in `make(99)`, a network with other initial
/// weights. `config(path)` is the run's configuration with its checkpoint at `path`. Checks that
/// the callback ran once per epoch and that the uninterrupted run's checkpoint loads as plain
/// weights.
pub fn resume(
    make: impl Fn(u64) -> Network,
    data: &Dataset,
    dir: &Path,
    config: impl Fn(PathBuf) -> TrainingConfig,
) -> Resumed {
    let mut whole = make(1);
    let full = whole
        .train(data, &config(dir.join("whole.safetensors")))
        .unwrap();
    assert_eq!(full.epochs.len(), 5);

    let cut = dir.join("cut.safetensors");
    let mut calls = 0;
    let part = make(1)
        .train_with(data, &config(cut.clone()), |e| {
            calls += 1;
            if e.epoch == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(
        calls, 2,
        "the callback runs once per epoch (on rank 0 only)"
    );
    assert_eq!(part.epochs.len(), 2);
    assert_eq!(part.stopped, Some(StopReason::Callback));

    let mut resumed = make(99);
    let rest = resumed
        .resume_training(&cut, data, &config(cut.clone()))
        .unwrap();
    assert_eq!(
        rest.epochs.len(),
        5,
        "the history includes the first epochs"
    );
    // The weights of a training checkpoint (rank 0 wrote them) load as a plain checkpoint.
    make(7).load(dir.join("whole.safetensors")).unwrap();
    Resumed {
        full,
        rest,
        whole,
        resumed,
    }
}

/// `x` and `y` within `tol` relative; with `tol` 0, the same bits.
fn close(x: f32, y: f32, tol: f32) -> bool {
    x.to_bits() == y.to_bits() || (tol > 0.0 && (x - y).abs() <= tol * y.abs().max(1e-6))
}

/// The two runs took the same path: every epoch's loss, validation loss and learning rate within
/// `tol` relative (0: the same bits), and the same best epoch.
pub fn assert_same_history(a: &TrainingHistory, b: &TrainingHistory, tol: f32, what: &str) {
    assert_eq!(a.epochs.len(), b.epochs.len(), "{what}");
    for (x, y) in a.epochs.iter().zip(&b.epochs) {
        let epoch = x.epoch;
        assert_eq!(epoch, y.epoch, "{what}");
        assert!(
            close(x.loss, y.loss, tol),
            "{what}: epoch {epoch} loss {} vs {}",
            x.loss,
            y.loss
        );
        let same_val = match (x.val_loss, y.val_loss) {
            (Some(vx), Some(vy)) => close(vx, vy, tol),
            (vx, vy) => vx.is_none() && vy.is_none(),
        };
        let (vx, vy) = (x.val_loss, y.val_loss);
        assert!(same_val, "{what}: epoch {epoch} val loss {vx:?} vs {vy:?}");
        assert_eq!(
            x.learning_rate.to_bits(),
            y.learning_rate.to_bits(),
            "{what}: epoch {epoch}"
        );
    }
    assert_eq!(a.best_epoch, b.best_epoch, "{what}");
}

/// The two networks' parameters within `tol` relative (0: the same bits).
pub fn assert_same_parameters(a: &Network, b: &Network, tol: f64, what: &str) {
    let (p, q) = (a.parameters().unwrap(), b.parameters().unwrap());
    let err = rel_err(&p, &q);
    let same_bits = p.iter().zip(&q).all(|(x, y)| x.to_bits() == y.to_bits());
    println!("{what}: parameter rel err {err:.2e}, same bits: {same_bits}");
    let same = if tol == 0.0 { same_bits } else { err <= tol };
    assert!(same, "{what}: parameters differ (rel err {err:e})");
}

/// A learning rate of 1e12 on a regression overflows the loss within a few steps: training on
/// `ctx` with `base` (its devices, for replicas) stops with an error naming epoch 1 and the first
/// step whose loss was not finite.
pub fn non_finite_loss_is_an_error(ctx: &Context, base: TrainingConfig) {
    let mut rng = Rng::new(4);
    let x: Vec<f32> = (0..64 * 4).map(|_| rng.normal()).collect();
    let y: Vec<f32> = (0..64).map(|_| rng.normal() * 10.0).collect();
    let data = Dataset::regression(x, 4, y, 1).unwrap();
    let mut net = Network::builder(ctx)
        .seed(2)
        .dense(4, 8, Activation::Identity)
        .dense(8, 1, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    let cfg = TrainingConfig {
        learning_rate: 1e12,
        optimizer: Optimizer::sgd(),
        batch_size: 4,
        shuffle: false,
        epochs: 3,
        ..base
    };
    match net.train(&data, &cfg) {
        Err(Error::NonFiniteLoss {
            epoch,
            step,
            global_step,
            loss,
        }) => {
            assert_eq!(epoch, 1, "{}", ctx.id());
            // The first step starts from sane weights; the blow-up comes after it.
            assert!((2..=16).contains(&step), "{}: step {step}", ctx.id());
            assert_eq!(global_step, step as u64);
            assert!(!loss.is_finite());
        }
        r => panic!("{}: lr 1e12 trained on: {r:?}", ctx.id()),
    }
}
