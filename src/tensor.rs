//! [`Tensor`]: a shape and a buffer on one context.

use crate::buffer::{Buffer, View};
use crate::context::Context;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::ops::TypedMemory;

/// A dense row-major tensor living on a context's device; its elements are f32 unless made
/// with [`Context::tensor_as`] ([`Tensor::dtype`]).
#[derive(Debug)]
pub struct Tensor {
    ctx: Context,
    shape: Vec<usize>,
    buffer: Buffer,
}

fn element_count(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::shape("tensor", format!("shape {shape:?} overflows usize")))
}

/// The element count of `shape`, which must be `given` (the length of the data to upload).
fn data_count(shape: &[usize], given: usize) -> Result<usize> {
    let n = element_count(shape)?;
    if n != given {
        return Err(Error::shape(
            "tensor",
            format!("shape {shape:?} holds {n} elements but {given} were given"),
        ));
    }
    Ok(n)
}

// The context's tensor constructors live here, with the tensor, so that the context (which a
// tensor holds) does not depend on the tensor in turn.
impl Context {
    /// A tensor with the given shape and contents (`data.len()` must equal the shape's product).
    pub fn tensor(&self, shape: &[usize], data: &[f32]) -> Result<Tensor> {
        Tensor::from_slice(self, shape, data)
    }

    /// A tensor of any [`Element`] type with the given shape and contents.
    pub fn tensor_as<T: Element>(&self, shape: &[usize], data: &[T]) -> Result<Tensor> {
        Tensor::from_slice_as(self, shape, data)
    }

    /// A zero-filled tensor.
    pub fn zeros(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::zeros(self, shape)
    }
}

impl Tensor {
    /// A tensor of `shape` over `buffer`, which holds its elements.
    fn on(ctx: &Context, shape: &[usize], buffer: Buffer) -> Self {
        Tensor {
            ctx: ctx.clone(),
            shape: shape.to_vec(),
            buffer,
        }
    }

    /// Uploads `data` with the given shape.
    pub fn from_slice(ctx: &Context, shape: &[usize], data: &[f32]) -> Result<Self> {
        let n = data_count(shape, data.len())?;
        let buffer = ctx.alloc(n)?;
        ctx.ops().upload(buffer.view(), data)?;
        Ok(Tensor::on(ctx, shape, buffer))
    }

    /// Uploads `data`, elements of any [`Element`] type, with the given shape.
    pub fn from_slice_as<T: Element>(ctx: &Context, shape: &[usize], data: &[T]) -> Result<Self> {
        let n = data_count(shape, data.len())?;
        let buffer = ctx.ops().alloc_as(T::DTYPE, n)?;
        ctx.ops().upload_as(buffer.view(), data)?;
        Ok(Tensor::on(ctx, shape, buffer))
    }

    /// A zero-filled tensor.
    pub fn zeros(ctx: &Context, shape: &[usize]) -> Result<Self> {
        let n = element_count(shape)?;
        let buffer = crate::ops::zeros(ctx.ops(), n)?;
        Ok(Tensor::on(ctx, shape, buffer))
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.buffer.dtype()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The context the tensor lives on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The whole tensor as a view, for ops and kernel launches.
    pub fn view(&self) -> View<'_> {
        self.buffer.view()
    }

    /// Copies the contents of an f32 tensor to the host (waits for queued work); another
    /// element type is [`Error::DTypeMismatch`] (see [`Tensor::to_vec_as`]).
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.len()];
        self.ctx.ops().download(self.view(), &mut out)?;
        Ok(out)
    }

    /// Copies the contents to the host as `T`, which must be the tensor's element type, else
    /// [`Error::DTypeMismatch`] (waits for queued work).
    pub fn to_vec_as<T: Element>(&self) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.len()];
        self.ctx.ops().download_as(self.view(), &mut out)?;
        Ok(out)
    }

    /// Same data, another shape with the same element count.
    pub fn reshape(self, shape: &[usize]) -> Result<Self> {
        let n = element_count(shape)?;
        if n != self.len() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "{:?} ({} elements) to {shape:?} ({n})",
                    self.shape,
                    self.len()
                ),
            ));
        }
        Ok(Tensor {
            shape: shape.to_vec(),
            ..self
        })
    }
}
