//! Neural networks on any device: dense, Elman RNN, LSTM and GRU layers, token embeddings,
//! dropout and layer normalization, softmax cross-entropy and MSE, SGD/Adam/AdamW over one flat
//! parameter buffer, training, data sets and checkpoints.
//!
//! [`NetworkBuilder::embedding`], [`NetworkBuilder::dropout`] and
//! [`NetworkBuilder::layer_norm`] follow `nn.Embedding`, `nn.Dropout` and `nn.LayerNorm`
//! (names `N.weight`, `N.bias`); dropout is active only in training, with masks drawn on the
//! device from a seeded counter.
//!
//! The recurrent layers ([`NetworkBuilder::rnn`], [`NetworkBuilder::lstm`],
//! [`NetworkBuilder::gru`]) use PyTorch's parameter names, layouts and gate orders
//! (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`; LSTM gates i, f, g, o; GRU gates
//! r, z, n), so checkpoints exchange weights with `torch.nn.RNN`/`LSTM`/`GRU`. Each runs the
//! input projection of all steps as one GEMM, backpropagates through the whole sequence, and
//! hands on either every hidden state or only the last one ([`RnnOutput`]).
//! [`NetworkBuilder::recurrent`] adds PyTorch's `num_layers`, `bidirectional` and `dropout`
//! ([`RecurrentOptions`]), with PyTorch's names (`weight_ih_l1`, `weight_hh_l0_reverse`, ...),
//! `[forward | reverse]` output rows, and `h_n` of the top layer as the `Last` output.
//! Every recurrent layer starts from a zero state unless given one:
//! [`Network::forward_with_state`] and [`Network::compute_gradients_with_state`] take PyTorch's
//! `h_0`/`c_0` and give back `h_n`/`c_n` and the gradients across both ends ([`RecurrentState`]),
//! and [`TrainingConfig::carry_state`] trains with truncated backpropagation through time over
//! [`Dataset::token_streams`].
//!
//! Everything runs through [`crate::Context`] and [`crate::Ops`]; layers never know the
//! backend.
//!
//! ```
//! use rnn::nn::{Dataset, Loss, Network, TrainingConfig};
//! use rnn::Activation;
//! let ctx = rnn::Context::cpu();
//! let mut net = Network::builder(&ctx)
//!     .seed(1)
//!     .dense(2, 8, Activation::Tanh)
//!     .dense(8, 2, Activation::Identity)
//!     .build(Loss::SoftmaxCrossEntropy)?;
//! let data = Dataset::classification(vec![0., 0., 0., 1., 1., 0., 1., 1.], 2, vec![0, 1, 1, 0], 2)?;
//! let config = TrainingConfig { use_gpu: false, epochs: 2, batch_size: 4, ..Default::default() };
//! let history = net.train(&data, &config)?;
//! assert_eq!(history.epochs.len(), 2);
//! # Ok::<(), rnn::Error>(())
//! ```

mod builder;
mod cast_boundary;
mod cell_state;
mod checkpoint;
mod config;
mod corpus;
mod data;
mod data_parallel;
mod dense;
mod dropout;
mod embedding;
mod gru;
mod history;
mod host_reduce;
mod layer;
mod layer_norm;
mod loss;
mod low_copy;
mod lstm;
mod network;
#[cfg(feature = "onnx")]
mod onnx;
mod optim;
mod padding;
mod params;
#[cfg(feature = "plot")]
mod plot;
mod precision;
mod progress;
mod recurrent;
mod rng;
mod rnn;
mod schedule;
mod shard_file;
mod size;
mod source;
mod stack;
mod state;
mod step_graph;
mod stepper;
mod strategy;
mod stream_batches;
mod stream_feed;
mod stream_plan;
mod stream_windows;
mod tbptt;
mod train;
mod train_state;
mod trainer;
mod varlen_cell;
mod workspace;
mod workspace_cache;

pub use builder::NetworkBuilder;
pub use config::{Optimizer, TrainingConfig, parse_device_env};
pub use corpus::CharCorpus;
pub use data::{Dataset, Targets};
pub use history::{EpochStats, Evaluation, StopReason, TrainingHistory};
pub use layer::LayerDesc;
pub use loss::Loss;
pub use network::Network;
#[cfg(feature = "onnx")]
pub use onnx::OnnxOptions;
pub use optim::OptimizerState;
pub use params::ParamInfo;
#[cfg(feature = "plot")]
pub use plot::{PlotFormat, plot_history};
pub use precision::Precision;
pub use progress::{Progress, READS_PER_SECOND};
pub use recurrent::RnnOutput;
pub use rng::Rng;
pub use schedule::{EarlyStopping, LrSchedule};
pub use shard_file::{ShardFiles, write_shard};
pub use size::MAX_INDEXED_ROWS;
pub use source::{
    DataSource, DataStream, GeneratedShards, InputsMut, SampleSpec, StreamGather, TargetSpec,
    TargetsMut, TrainData,
};
pub use stack::{RecurrentCell, RecurrentOptions};
pub use state::{LayerState, RecurrentState};
pub use stepper::{StepState, Stepper};
pub use train::{EpochCallback, format_epoch};
pub use trainer::Trainer;
