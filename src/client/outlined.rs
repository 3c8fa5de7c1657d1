//! Futures compiled once: large, rarely run `async` bodies behind a box.
//!
//! rustc compiles an `async fn`'s state machine into every codegen unit that awaits it, and
//! into every crate downstream that reaches it through an `async fn` of ours: a coroutine is
//! always instantiated where it is used, `#[inline(never)]` or not. Opening a connection (its
//! SASL exchange, its token and credential look-ups) was compiled twelve times into one binary,
//! and a process running any of it held pages of each copy it touched.
//!
//! The invariant: a future in an [`Outlined`] box is created inside a plain, non-generic,
//! `#[inline(never)]` function, so its state machine exists once, in this crate, and callers
//! reach it through the box's vtable. Only futures that run once per connection, look-up,
//! commit or start pass through here, never one a publish or a fetch awaits per record: each
//! costs one allocation.

use std::future::Future;
use std::pin::Pin;

/// A boxed future whose state machine is compiled once (see the module's invariant).
pub(crate) type Outlined<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Spawns `future` on the current runtime as a boxed task.
///
/// tokio compiles its task machinery (the harness's poll, completion, cancellation and
/// join-handle paths, about 10 KB) once per spawned future type; every task spawned here
/// shares the one instantiation for its output type. For tasks spawned once per client,
/// connection, subscription or commit, never per record.
///
/// # Panics
///
/// Outside a tokio runtime, as `tokio::spawn`.
pub(crate) fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let boxed: Outlined<'static, F::Output> = Box::pin(future);
    tokio::spawn(boxed)
}

/// [`spawn`] on `runtime`.
pub(crate) fn spawn_on<F>(
    runtime: &tokio::runtime::Handle,
    future: F,
) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let boxed: Outlined<'static, F::Output> = Box::pin(future);
    runtime.spawn(boxed)
}
