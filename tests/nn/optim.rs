//! Optimizer steps against values computed by hand from PyTorch's update rules.

use rnn::Context;
use rnn::nn::{Optimizer, OptimizerState};

fn run(opt: Optimizer, lr: f32, p0: &[f32], grads: &[&[f32]]) -> Vec<f32> {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let p = ctx.tensor(&[p0.len()], p0).unwrap();
    let g = ctx.zeros(&[p0.len()]).unwrap();
    let mut state = OptimizerState::new(ops, opt, p0.len(), lr).unwrap();
    for gs in grads {
        ops.upload(g.view(), gs).unwrap();
        state.step(ops, p.view(), g.view()).unwrap();
    }
    assert_eq!(state.steps(), grads.len() as u64);
    p.to_vec().unwrap()
}

fn close(a: &[f32], b: &[f64]) {
    for (x, y) in a.iter().zip(b) {
        assert!(
            (*x as f64 - y).abs() <= 1e-5 * y.abs().max(1.0),
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn cpu_sgd_plain_and_momentum() {
    let out = run(Optimizer::sgd(), 0.1, &[1.0, -2.0], &[&[0.5, -1.0]]);
    close(&out, &[0.95, -1.9]);
    // v1 = g1; p1 = p0 - lr v1; v2 = m v1 + g2; p2 = p1 - lr v2.
    let out = run(Optimizer::sgd_momentum(0.9), 0.1, &[1.0], &[&[1.0], &[2.0]]);
    let p1 = 1.0 - 0.1 * 1.0;
    let v2 = 0.9 * 1.0 + 2.0;
    close(&out, &[p1 - 0.1 * v2]);
    // Nesterov with weight decay: g' = g + wd p; v = m v + g'; step = g' + m v.
    let opt = Optimizer::Sgd {
        momentum: 0.5,
        weight_decay: 0.1,
        nesterov: true,
    };
    let out = run(opt, 0.2, &[2.0], &[&[1.0]]);
    let g = 1.0 + 0.1 * 2.0;
    let v = g;
    close(&out, &[2.0 - 0.2 * (g + 0.5 * v)]);
}

fn adam_ref(p: f64, gs: &[f64], lr: f64, wd: f64, decoupled: bool) -> f64 {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
    let (mut m, mut v, mut p) = (0.0, 0.0, p);
    for (t, &g0) in gs.iter().enumerate() {
        let t = (t + 1) as i32;
        let g = if decoupled { g0 } else { g0 + wd * p };
        if decoupled {
            p -= lr * wd * p;
        }
        m = b1 * m + (1.0 - b1) * g;
        v = b2 * v + (1.0 - b2) * g * g;
        let mh = m / (1.0 - b1.powi(t));
        let vh = v / (1.0 - b2.powi(t));
        p -= lr * mh / (vh.sqrt() + eps);
    }
    p
}

#[test]
fn cpu_adam_and_adamw_two_steps() {
    let out = run(
        Optimizer::adam(),
        0.01,
        &[0.5, -1.5],
        &[&[0.2, -3.0], &[-0.1, 1.0]],
    );
    close(
        &out,
        &[
            adam_ref(0.5, &[0.2, -0.1], 0.01, 0.0, false),
            adam_ref(-1.5, &[-3.0, 1.0], 0.01, 0.0, false),
        ],
    );
    // Weight decay 0.1, in the gradient (Adam) and decoupled from it (AdamW).
    let (beta1, beta2, eps, weight_decay) = (0.9, 0.999, 1e-8, 0.1);
    for decoupled in [false, true] {
        let opt = if decoupled {
            Optimizer::AdamW {
                beta1,
                beta2,
                eps,
                weight_decay,
            }
        } else {
            Optimizer::Adam {
                beta1,
                beta2,
                eps,
                weight_decay,
            }
        };
        let out = run(opt, 0.01, &[0.5], &[&[0.2], &[0.3]]);
        close(&out, &[adam_ref(0.5, &[0.2, 0.3], 0.01, 0.1, decoupled)]);
    }
}

#[test]
fn cpu_bad_optimizer_settings_are_errors() {
    let ctx = Context::cpu();
    let bad = Optimizer::Adam {
        beta1: 1.0,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
    };
    let err = OptimizerState::new(ctx.ops(), bad, 4, 1e-3).unwrap_err();
    assert!(err.to_string().contains("beta1"), "{err}");
    let bad = Optimizer::Sgd {
        momentum: 0.0,
        weight_decay: 0.0,
        nesterov: true,
    };
    assert!(OptimizerState::new(ctx.ops(), bad, 4, 1e-3).is_err());
}

#[test]
fn cpu_learning_rate_changes_between_steps() {
    // Two SGD steps at 0.1 then one at 0.01: p = 1 - 0.1 - 0.1 - 0.01 with unit gradients.
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let p = ctx.tensor(&[1], &[1.0]).unwrap();
    let g = ctx.tensor(&[1], &[1.0]).unwrap();
    let mut state = OptimizerState::new(ops, Optimizer::sgd(), 1, 0.1).unwrap();
    state.step(ops, p.view(), g.view()).unwrap();
    state.step(ops, p.view(), g.view()).unwrap();
    state.set_learning_rate(ops, 0.01).unwrap();
    assert_eq!(state.learning_rate(), 0.01);
    state.step(ops, p.view(), g.view()).unwrap();
    close(&p.to_vec().unwrap(), &[1.0 - 0.1 - 0.1 - 0.01]);
    assert_eq!(state.steps(), 3);
}
