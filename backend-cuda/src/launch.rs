//! Typed kernel arguments: a launch takes its arguments through [`LaunchArgs`], which accepts only
//! [`KernelParam`] values (plain integers and the `#[repr(C)]` parameter blocks declared next to
//! the code that fills them) and borrows each one until the launch has been queued.
//!
//! `cuLaunchKernel` copies the argument values when it is called, so borrowing until then is all
//! the lifetime a value needs; what the type system cannot see (that the kernel's declared
//! parameters are exactly these types, and that the device ranges they describe are live) stays
//! the caller's obligation, stated at [`crate::context::Device::launch`].

use std::ffi::c_void;
use std::marker::PhantomData;

/// A value that may be passed by value as one kernel parameter.
///
/// # Safety
/// The type has a fixed C layout (a primitive, or `#[repr(C)]` with such fields) with no padding
/// that the kernel reads, and implementors name, in a `// SAFETY:` comment, the CUDA type it
/// mirrors field for field.
pub(crate) unsafe trait KernelParam: Copy {}

// SAFETY: `unsigned long long` / `u64*` / `CUdeviceptr` parameters are 8-byte integers.
unsafe impl KernelParam for u64 {}

/// The grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchConfig {
    /// Blocks in x, y, z.
    pub(crate) grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub(crate) block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub(crate) shared: u32,
}

impl LaunchConfig {
    /// A one-dimensional launch of `grid` blocks of `block` threads with `shared` bytes of
    /// dynamic shared memory.
    pub(crate) fn linear(grid: u32, block: u32, shared: u32) -> Self {
        Self { grid: (grid, 1, 1), block: (block, 1, 1), shared }
    }
}

/// The arguments of one launch, in the kernel's parameter order, each borrowed for `'a`.
pub(crate) struct LaunchArgs<'a> {
    ptrs: Vec<*mut c_void>,
    _borrows: PhantomData<&'a ()>,
}

impl<'a> LaunchArgs<'a> {
    /// No arguments yet.
    pub(crate) fn new() -> Self {
        Self { ptrs: Vec::new(), _borrows: PhantomData }
    }

    /// Appends `value` as the next parameter.
    pub(crate) fn arg<T: KernelParam>(mut self, value: &'a T) -> Self {
        self.ptrs.push((value as *const T).cast_mut().cast());
        self
    }

    /// The pointer array `cuLaunchKernel` reads (it copies the values it points to).
    pub(crate) fn as_params(&mut self) -> &mut [*mut c_void] {
        &mut self.ptrs
    }

    /// How many parameters were pushed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ptrs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_point_at_the_values_in_order() {
        let (a, b) = (7u64, 9u64);
        let mut args = LaunchArgs::new().arg(&a).arg(&b);
        assert_eq!(args.len(), 2);
        let p = args.as_params();
        // SAFETY: the pointers were made from `a` and `b`, which are alive and u64.
        let read = |i: usize| unsafe { *(p[i] as *const u64) };
        assert_eq!((read(0), read(1)), (7, 9));
    }
}
