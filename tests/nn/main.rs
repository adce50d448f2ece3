//! Layers, losses, optimizers and training: gradient checks, convergence, bad input.

/// One `#[test]` per `name => Target` variant, each running `check(target)`; with `(named)`,
/// `check(target, "name")`.
macro_rules! target_tests {
    ($check:ident: $($test:ident => $target:ident),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                $check(crate::support::Target::$target);
            }
        )+
    };
    ($check:ident(named): $($test:ident => $target:ident),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                $check(crate::support::Target::$target, stringify!($test));
            }
        )+
    };
}

#[cfg(feature = "onnx")]
#[path = "../support/onnx_case.rs"]
mod onnx_case;
#[path = "../support/mod.rs"]
mod support;

mod checkpoint;
mod data_parallel;
mod errors;
mod eval_graphs;
mod fixtures;
mod follow;
mod gated;
mod gradcheck;
mod layers;
mod loop_checks;
mod low_recurrence;
mod nccl_loop;
#[cfg(feature = "onnx")]
mod onnx;
mod optim;
mod precision;
mod replicas;
mod robust;
mod stacked;
mod state;
mod stepper;
mod stream;
mod tbptt;
mod train;
mod ux;
mod varlen;
