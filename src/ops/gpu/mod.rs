//! The op set written once for every GPU backend, over [`crate::backend::Device`].
// SKELETON: replaced by the generic GPU ops implementation.
