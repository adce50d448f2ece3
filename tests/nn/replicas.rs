//! Data-parallel training on CPU replicas (`devices: [Cpu, Cpu]`, a host all-reduce): the same
//! loop as one device, so schedules, early stopping with `restore_best`, callbacks, training
//! checkpoints and resume work there too, and two replicas with half the batch each train
//! what one device trains on the whole batch.

use std::ops::ControlFlow;
use std::path::PathBuf;

use rnn::nn::{
    Dataset, EarlyStopping, Loss, LrSchedule, Network, Optimizer, Progress, Rng, StopReason,
    TrainingConfig,
};
use rnn::{Activation, Context, DeviceId, Error};

use crate::fixtures::{assert_same_bits, blobs, classifier};
use crate::support::rel_err;

fn mlp(seed: u64) -> Network {
    classifier(&Context::cpu(), seed, [8, 16, 3], Activation::Tanh)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnn-replicas-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Everything `Network::train` offers at once: Adam, warmup-then-cosine, shuffling, clipping,
/// a validation split, early stopping that restores the best epoch, a checkpoint per epoch.
/// `replicas` CPU replicas (1: one device).
fn config(replicas: usize, path: Option<PathBuf>) -> TrainingConfig {
    TrainingConfig {
        use_gpu: false,
        devices: if replicas > 1 {
            vec![DeviceId::Cpu; replicas]
        } else {
            Vec::new()
        },
        epochs: 5,
        // 192 training samples: 6 global batches, 16 rows per replica.
        batch_size: 32,
        learning_rate: 1e-2,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(1.0),
        seed: 5,
        validation_split: 0.2,
        progress: Progress::Off,
        schedule: LrSchedule::WarmupCosine {
            warmup_steps: 10,
            min_lr: 1e-4,
        },
        early_stopping: Some(EarlyStopping {
            patience: 100,
            min_delta: 0.0,
            restore_best: true,
        }),
        checkpoint_path: path,
        ..Default::default()
    }
}

/// Two replicas with 16 rows each compute the mean gradient of the 32-row batch one device
/// computes (no dropout, mean loss, the same shuffled order), so both runs end with the same
/// parameters and history up to f32 rounding — through the schedule, clipping and validation.
#[test]
fn two_cpu_replicas_match_one_device_on_the_whole_batch() {
    let data = blobs(240, 2);
    for (name, optimizer, lr) in [
        ("adam", Optimizer::adam(), 1e-2),
        ("sgd", Optimizer::sgd_momentum(0.9), 5e-2),
    ] {
        let mut single = mlp(1);
        let h1 = single
            .train(
                &data,
                &TrainingConfig {
                    optimizer,
                    learning_rate: lr,
                    ..config(1, None)
                },
            )
            .unwrap();
        let mut replicated = mlp(1);
        let h2 = replicated
            .train(
                &data,
                &TrainingConfig {
                    optimizer,
                    learning_rate: lr,
                    ..config(2, None)
                },
            )
            .unwrap();
        let (p1, p2) = (
            single.parameters().unwrap(),
            replicated.parameters().unwrap(),
        );
        let err = rel_err(&p2, &p1);
        println!("{name}: parameter rel err {err:.2e}");
        assert!(err < 1e-6, "{name}: parameters differ: rel err {err:e}");
        assert_eq!(h1.epochs.len(), h2.epochs.len());
        for (a, b) in h2.epochs.iter().zip(&h1.epochs) {
            for (x, y, what) in [
                (a.loss, b.loss, "loss"),
                (a.val_loss.unwrap(), b.val_loss.unwrap(), "val_loss"),
                (a.accuracy.unwrap(), b.accuracy.unwrap(), "accuracy"),
                (a.learning_rate, b.learning_rate, "learning rate"),
            ] {
                let d = (x - y).abs() / y.abs().max(1e-6);
                assert!(d < 1e-5, "{name}: epoch {} {what} {x} vs {y}", a.epoch);
            }
        }
        assert_eq!(h1.best_epoch, h2.best_epoch, "{name}");
    }
}

/// Five epochs on two replicas; two epochs stopped by the callback, then `resume_training`
/// from their checkpoint in a network with other initial weights: the same bits.
#[test]
fn cpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run() {
    let data = blobs(240, 2);
    let dir = temp_dir("resume");
    let mut whole = mlp(1);
    let full = whole
        .train(&data, &config(2, Some(dir.join("whole.safetensors"))))
        .unwrap();
    assert_eq!(full.epochs.len(), 5);
    assert!(full.best_epoch.is_some());
    assert!(
        full.epochs[0].learning_rate != full.epochs[4].learning_rate,
        "the schedule moved the learning rate"
    );

    let cut = dir.join("cut.safetensors");
    let mut calls = 0;
    let part = mlp(1)
        .train_with(&data, &config(2, Some(cut.clone())), |e| {
            calls += 1;
            if e.epoch == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(calls, 2, "the callback runs once per epoch, on rank 0 only");
    assert_eq!(part.epochs.len(), 2);
    assert_eq!(part.stopped, Some(StopReason::Callback));

    let mut resumed = mlp(99);
    let rest = resumed
        .resume_training(&cut, &data, &config(2, Some(cut.clone())))
        .unwrap();
    assert_same_bits(&rest, &full, "resumed vs uninterrupted");
    let (p, q) = (resumed.parameters().unwrap(), whole.parameters().unwrap());
    assert!(
        p.iter().zip(&q).all(|(a, b)| a.to_bits() == b.to_bits()),
        "parameters differ after resuming (rel err {:e})",
        rel_err(&p, &q)
    );
    // The checkpoint's weights are the trained network's (rank 0 wrote them).
    let mut plain = mlp(7);
    plain.load(dir.join("whole.safetensors")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no improvement ever good enough, early stopping ends the run after `1 + patience`
/// epochs and puts back the parameters of epoch 1: those of a one-epoch run.
#[test]
fn cpu_replicas_stop_early_and_restore_the_best_epoch() {
    let data = blobs(240, 3);
    let base = TrainingConfig {
        schedule: LrSchedule::Constant,
        early_stopping: None,
        ..config(2, None)
    };
    let mut one_epoch = mlp(1);
    one_epoch
        .train(
            &data,
            &TrainingConfig {
                epochs: 1,
                ..base.clone()
            },
        )
        .unwrap();
    let mut stopped = mlp(1);
    let h = stopped
        .train(
            &data,
            &TrainingConfig {
                epochs: 10,
                early_stopping: Some(EarlyStopping {
                    patience: 2,
                    min_delta: 1e9,
                    restore_best: true,
                }),
                ..base
            },
        )
        .unwrap();
    assert_eq!(h.stopped, Some(StopReason::EarlyStopping));
    assert_eq!(h.epochs.len(), 3);
    assert_eq!(h.best_epoch, Some(1));
    let (p, q) = (
        stopped.parameters().unwrap(),
        one_epoch.parameters().unwrap(),
    );
    assert!(
        p.iter().zip(&q).all(|(a, b)| a.to_bits() == b.to_bits()),
        "restore_best did not put back epoch 1 (rel err {:e})",
        rel_err(&p, &q)
    );
}

/// A loss that blows up on replicas is the same error as on one device, from every rank at
/// once (no rank is left waiting in the all-reduce).
#[test]
fn cpu_replicas_report_a_non_finite_loss() {
    let mut rng = Rng::new(4);
    let x: Vec<f32> = (0..64 * 4).map(|_| rng.normal()).collect();
    let y: Vec<f32> = (0..64).map(|_| rng.normal() * 10.0).collect();
    let data = Dataset::regression(x, 4, y, 1).unwrap();
    let mut net = Network::builder(&Context::cpu())
        .seed(2)
        .dense(4, 8, Activation::Identity)
        .dense(8, 1, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    let cfg = TrainingConfig {
        use_gpu: false,
        devices: vec![DeviceId::Cpu; 2],
        learning_rate: 1e12,
        optimizer: Optimizer::sgd(),
        batch_size: 4,
        shuffle: false,
        epochs: 3,
        progress: Progress::Off,
        ..Default::default()
    };
    match net.train(&data, &cfg) {
        Err(Error::NonFiniteLoss {
            epoch, step, loss, ..
        }) => {
            assert_eq!(epoch, 1);
            assert!((2..=16).contains(&step), "step {step}");
            assert!(!loss.is_finite());
        }
        r => panic!("lr 1e12 trained on: {r:?}"),
    }
}

/// A failure on rank 0 alone (its checkpoint cannot be written) ends every replica instead
/// of leaving the others waiting, and is the error the caller sees.
#[test]
fn a_failing_rank_ends_the_others() {
    let dir = temp_dir("failing");
    let cfg = TrainingConfig {
        // A directory where the file should be: the write fails.
        checkpoint_path: Some(dir.clone()),
        ..config(2, None)
    };
    let err = mlp(1).train(&blobs(240, 2), &cfg).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
