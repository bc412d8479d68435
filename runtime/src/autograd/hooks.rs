//! Post-accumulate-grad hooks: a function called once per backward pass on a leaf,
//! after every gradient that pass sends to the leaf has been accumulated into its
//! `.grad` (PyTorch's `Tensor.register_post_accumulate_grad_hook`). Data-parallel
//! training uses them to start reducing a parameter's gradient while the rest of
//! backward still runs.
//!
//! Owns: the hook table. Must not: know what a hook does; the engine decides when a
//! leaf's gradient is final and calls [`fire`].

use crate::error::{OpalError, Result};
use crate::Tensor;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A hook: gets the leaf (its `.grad` holds the pass's accumulated gradient). An
/// `Err` ends the backward pass with that error.
pub type GradHook = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

struct Entry {
    id: u64,
    // Kept alive while registered, so its address (the table's key) is not reused.
    _leaf: Tensor,
    hook: GradHook,
}

type Table = HashMap<usize, Vec<Entry>>;

static COUNT: AtomicUsize = AtomicUsize::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn table() -> MutexGuard<'static, Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Removes its hook when dropped.
#[must_use = "the hook is removed when the handle is dropped"]
pub struct HookHandle {
    addr: usize,
    id: u64,
}

impl Drop for HookHandle {
    fn drop(&mut self) {
        let mut t = table();
        if let Some(v) = t.get_mut(&self.addr) {
            let before = v.len();
            v.retain(|e| e.id != self.id);
            COUNT.fetch_sub(before - v.len(), Ordering::Release);
            if v.is_empty() {
                t.remove(&self.addr);
            }
        }
    }
}

/// Calls `hook` after each backward pass (of [`super::backward`] or
/// [`Tensor::backward`], not [`super::grad`], which writes no `.grad`) has
/// accumulated all of its gradient for `leaf` into `leaf.grad()`. `leaf` must be a
/// leaf that requires grad. Hooks of one leaf run in registration order, on the
/// thread running backward; the hook stays until the handle is dropped.
pub fn register_post_accumulate_grad_hook(
    leaf: &Tensor,
    hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
) -> Result<HookHandle> {
    if !leaf.is_defined() || !leaf.requires_grad() || !leaf.is_leaf() {
        return Err(OpalError::msg(
            "register_post_accumulate_grad_hook: the tensor must be a leaf that requires grad",
        ));
    }
    let addr = leaf.impl_addr();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    table().entry(addr).or_default().push(Entry {
        id,
        _leaf: leaf.clone(),
        hook: Arc::new(hook),
    });
    COUNT.fetch_add(1, Ordering::Release);
    Ok(HookHandle { addr, id })
}

/// True when some hook is registered (the engine skips its counting otherwise).
pub(super) fn any() -> bool {
    COUNT.load(Ordering::Acquire) > 0
}

/// True when `addr` (a tensor's `impl_addr`) has hooks.
pub(super) fn has(addr: usize) -> bool {
    table().contains_key(&addr)
}

/// Runs `leaf`'s hooks (outside the table's lock, so a hook may register or drop
/// hooks).
pub(super) fn fire(leaf: &Tensor) -> Result<()> {
    let hooks: Vec<GradHook> = match table().get(&leaf.impl_addr()) {
        Some(v) => v.iter().map(|e| e.hook.clone()).collect(),
        None => return Ok(()),
    };
    for h in hooks {
        h(leaf)?;
    }
    Ok(())
}
