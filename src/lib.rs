//! ndgather: GatherND and Gather over N-dimensional arrays of any element
//! size and layout.
//!
//! The core knows nothing of Python: arrays are [`ArrayView`]s (bytes,
//! shape, byte strides), a call is planned ([`plan_gather_nd`],
//! [`plan_gather`]) and then executed ([`Plan::execute`]), and every failure
//! is a [`GatherError`]. The crate root is that one-shot gather; each wing
//! has a module of its own: [`prepared`] (indices checked and resolved once
//! for many arrays of one shape), [`chunked`] (a gather from a grid of
//! chunks, `ndgather.dask`'s), [`quantized`] (com.microsoft
//! GatherBlockQuantized) and [`rows`] (the row path of short lists of ids).
//! The PyO3 bindings live in `python/`, compiled only with the `python`
//! feature.

#![deny(missing_docs)]

pub mod chunked;
mod convert;
mod copy;
mod error;
mod execute;
mod fork;
mod half;
mod hints;
mod huge_pages;
mod index;
mod kept;
mod kernel;
mod layout;
mod machine;
mod mode;
mod mover;
#[cfg(target_arch = "x86_64")]
mod nibbles;
mod offsets;
// Used by the Python bindings' gathers from file mappings; built without
// them too, so that `cargo test` covers it.
#[cfg_attr(not(feature = "python"), allow(dead_code))]
mod pages;
mod plan;
pub mod prepared;
pub mod quantized;
mod real;
// The result buffers of the Python bindings; built without them too, so
// that `cargo test` covers it.
#[cfg_attr(not(feature = "python"), allow(dead_code))]
mod pool;
pub mod rows;
mod snapshot;
mod split;
mod stand_in;
mod threads;
mod validate;
mod walk;

#[cfg(test)]
mod core_tests;
#[cfg(test)]
mod test_support;

#[cfg(feature = "python")]
mod python;

pub use convert::{Cast, Scalar};
pub use error::{GatherError, OutOfRange, Result};
pub use execute::Validation;
pub use index::IndexType;
pub use layout::{span, ArrayView};
pub use machine::set_caches;
pub use mode::Mode;
pub use plan::{plan_gather, plan_gather_nd, Operator, Plan};
pub use threads::{
    linger_us, num_threads, set_linger_us, set_num_threads, set_wake_us, MAX_LINGER_US, MAX_THREADS,
};

/// Makes ndgather safe to use in a process that forks while other threads
/// run: registers the fork handlers of the worker pool (`threads`) and of
/// the result buffers (`pool`), and fills the core's one-time cells, so
/// that a child forked at any moment never waits on a lock or a cell that
/// only a thread it does not have would release. A child also drops the
/// pooled result buffers it inherited.
///
/// Call it once, before any other thread may use ndgather; calling it
/// again does nothing. The Python module calls it when it is imported.
/// Fails only if the handlers cannot be registered (out of memory).
pub fn install_fork_handlers() -> std::io::Result<()> {
    threads::cpus();
    fork::install::<threads::Workers>()?;
    fork::install::<pool::Buffers>()
}
