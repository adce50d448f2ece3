//! Neural networks on any device: dense, Elman RNN, LSTM and GRU layers, softmax cross-entropy
//! and MSE, SGD/Adam/AdamW over one flat parameter buffer, training, data sets and checkpoints.
//!
//! The recurrent layers ([`NetworkBuilder::rnn`], [`NetworkBuilder::lstm`],
//! [`NetworkBuilder::gru`]) use PyTorch's parameter names, layouts and gate orders
//! (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`; LSTM gates i, f, g, o; GRU gates
//! r, z, n), so checkpoints exchange weights with `torch.nn.RNN`/`LSTM`/`GRU`. Each runs the
//! input projection of all steps as one GEMM, backpropagates through the whole sequence, and
//! hands on either every hidden state or only the last one ([`RnnOutput`]).
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
mod checkpoint;
mod config;
mod corpus;
mod data;
mod data_parallel;
mod dense;
mod gru;
mod history;
mod layer;
mod loss;
mod lstm;
mod network;
mod optim;
mod params;
mod recurrent;
mod rng;
mod rnn;
mod size;
mod step_graph;
mod train;
mod trainer;
mod workspace;
mod workspace_cache;

pub use builder::NetworkBuilder;
pub use config::{Optimizer, TrainingConfig, parse_device_env};
pub use corpus::CharCorpus;
pub use data::{Dataset, Targets};
pub use history::{EpochStats, Evaluation, TrainingHistory};
pub use layer::LayerDesc;
pub use loss::Loss;
pub use network::Network;
pub use optim::OptimizerState;
pub use params::ParamInfo;
pub use rng::Rng;
pub use rnn::RnnOutput;
pub use size::MAX_INDEXED_ROWS;
pub use train::format_epoch;
pub use trainer::Trainer;
